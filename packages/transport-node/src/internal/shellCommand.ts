/**
 * What a shell command line does that would leave work running after the tool returns, read from its syntax tree
 * (tree-sitter's bash grammar, through web-tree-sitter). The analysis of a parsed tree is pure ({@link analyze});
 * parsing needs the grammar, loaded once ({@link parser}).
 *
 * Found: a statement sent to the background (`&`, `coproc`); a detaching program (`setsid`, `nohup`, `disown`,
 * `daemonize`, `start-stop-daemon`, `screen`/`tmux`/`dtach`, `at`/`batch`, `systemd-run`, `bg`) by its basename,
 * also behind variable assignments (`X=1 setsid`) and wrappers that run their arguments (`env -i`, `nice -n 5`,
 * `timeout 10`, `command`, `exec`, `sudo`, `stdbuf`, `ionice`, `chrt`, `taskset`, `time`, `busybox`); the same
 * inside `bash -c '…'` / `sh -lc "…"` / `eval …` / a here-document or here-string fed to a shell (parsed again,
 * recursively), command substitutions, subshells, functions and control flow; inline code of an interpreter
 * (`perl -e`, `python -c`, `node -e`, `ruby -e`, …) that mentions forking, sessions, daemons or spawning; a
 * command name the parser cannot know (`$cmd`); a shell reading its commands from a pipe; text that does not
 * parse.
 *
 * Not found (no command-line matcher can): a script or program that detaches by itself (`./start.sh`,
 * `python app.py`, `make run`, `docker run -d`, `ssh -f`, `emacs --daemon`); functions and aliases defined before
 * the command (the Bash tool sources a snapshot of the user's shell); interpreter code that hides its calls
 * (`getattr(os, "fo" + "rk")()`); commands built at run time from data (`$(cat cmd.txt)` as an argument of a
 * program that runs it).
 */
import { createRequire } from "node:module"

/**
 * The part of web-tree-sitter's syntax node this module reads. Declared here rather than imported: web-tree-sitter's
 * own declarations name Emscripten's global types, which an application without `@types/emscripten` cannot check,
 * and nothing of this package's declarations may require them.
 */
interface Node {
  readonly type: string
  readonly text: string
  readonly isNamed: boolean
  readonly hasError: boolean
  readonly children: ReadonlyArray<Node | null>
  readonly namedChildren: ReadonlyArray<Node | null>
  childrenForFieldName(name: string): ReadonlyArray<Node | null>
}

/** The part of web-tree-sitter's parser this module uses (see {@link Node}). */
interface Parser {
  parse(text: string): { readonly rootNode: Node; delete(): void } | null
}

/** One reason a command would leave work behind. @internal */
export interface Finding {
  readonly kind:
    | "background"
    | "detaching-program"
    | "interpreter-code"
    | "dynamic-command"
    | "shell-from-pipe"
    | "unparsable"
  /** The piece of the command it is about. */
  readonly text: string
}

const detaching = new Set([
  "setsid",
  "nohup",
  "disown",
  "daemonize",
  "daemon",
  "start-stop-daemon",
  "screen",
  "tmux",
  "dtach",
  "abduco",
  "at",
  "batch",
  "systemd-run",
  "bg",
  "coproc"
])

const shells = new Set(["sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "busybox", "fish", "yash", "posh"])

const interpreters = new Set([
  "perl",
  "python",
  "python2",
  "python3",
  "node",
  "nodejs",
  "bun",
  "deno",
  "ruby",
  "php",
  "lua",
  "tclsh",
  "awk",
  "gawk",
  "osascript"
])

/** Inline code that mentions any of these may start work that outlives the tool. */
const forking =
  /fork|setsid|daemon|spawn|popen|subprocess|system\s*\(|exec[lv]?p?e?\s*\(|detach|nohup|disown|`|child_process|Process\.|proc_open|pcntl|posix_spawn/i

/**
 * Wrappers that run their arguments as a command, with how many arguments their options take: `env`'s `-u NAME`,
 * `nice`'s `-n N`, `timeout`'s duration. Options not listed take none.
 */
const wrappers: Readonly<Record<string, { readonly withValue: ReadonlySet<string>; readonly positional: number }>> = {
  env: { withValue: new Set(["-u", "--unset", "-C", "--chdir", "-S", "--split-string"]), positional: 0 },
  nice: { withValue: new Set(["-n", "--adjustment"]), positional: 0 },
  timeout: { withValue: new Set(["-s", "--signal", "-k", "--kill-after"]), positional: 1 },
  command: { withValue: new Set(), positional: 0 },
  exec: { withValue: new Set(["-a"]), positional: 0 },
  sudo: { withValue: new Set(["-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U"]), positional: 0 },
  doas: { withValue: new Set(["-u", "-C"]), positional: 0 },
  stdbuf: { withValue: new Set(["-i", "-o", "-e"]), positional: 0 },
  ionice: { withValue: new Set(["-c", "-n", "-p", "-P", "-u"]), positional: 0 },
  chrt: { withValue: new Set(), positional: 1 },
  taskset: { withValue: new Set(), positional: 1 },
  time: { withValue: new Set(["-f", "-o"]), positional: 0 },
  builtin: { withValue: new Set(), positional: 0 },
  xargs: { withValue: new Set(["-I", "-L", "-n", "-P", "-s", "-d", "-E", "-a"]), positional: 0 },
  busybox: { withValue: new Set(), positional: 0 },
  unbuffer: { withValue: new Set(), positional: 0 },
  caffeinate: { withValue: new Set(["-t", "-w"]), positional: 0 },
  flock: { withValue: new Set(["-w", "-E", "-c"]), positional: 1 }
}

const basename = (name: string): string => name.slice(name.lastIndexOf("/") + 1)

/** The text of a word when it is known without running anything (no expansion), else undefined. */
const staticText = (node: Node): string | undefined => {
  switch (node.type) {
    case "word":
    case "number":
      return node.text.replace(/\\(.)/gs, "$1")
    case "raw_string":
      return node.text.slice(1, -1)
    case "ansi_c_string":
      return node.text.slice(2, -1)
    case "string": {
      let out = ""
      for (const child of node.namedChildren) {
        if (child === null) continue
        if (child.type !== "string_content") return undefined
        out += child.text.replace(/\\([$`"\\\n])/g, "$1")
      }
      return out
    }
    case "concatenation": {
      let out = ""
      for (const child of node.namedChildren) {
        if (child === null) continue
        const part = staticText(child)
        if (part === undefined) return undefined
        out += part
      }
      return out
    }
    case "command_name":
      return node.namedChildren[0] === undefined || node.namedChildren[0] === null
        ? undefined
        : staticText(node.namedChildren[0])
    default:
      return undefined
  }
}

/** The last path component of a command name, when it is static (`$HOME/bin/tool` is `tool`). */
const nameOf = (node: Node): string | undefined => {
  const text = staticText(node)
  if (text !== undefined) return basename(text)
  const inner = node.type === "command_name" ? node.namedChildren[0] : node
  if (inner === null || inner === undefined || inner.type !== "concatenation") return undefined
  const last = inner.namedChildren.at(-1)
  const tail = last === null || last === undefined ? undefined : staticText(last)
  return tail !== undefined && tail.includes("/") ? basename(tail) : undefined
}

/** Reads a command line's findings; `parse` parses nested shell code (`bash -c`, `eval`, here-documents). */
export const analyze = (root: Node, parse: (text: string) => ReadonlyArray<Finding>): ReadonlyArray<Finding> => {
  const findings: Array<Finding> = []
  if (root.hasError) findings.push({ kind: "unparsable", text: root.text.slice(0, 200) })

  /** A simple command given as its words (after assignments), the redirects of its statement, and the node. */
  const command = (words: ReadonlyArray<Node>, redirects: ReadonlyArray<Node>, node: Node, piped: boolean) => {
    let i = 0
    while (i < words.length) {
      const name = nameOf(words[i])
      if (name === undefined) {
        findings.push({ kind: "dynamic-command", text: node.text })
        return
      }
      if (detaching.has(name)) {
        findings.push({ kind: "detaching-program", text: node.text })
        return
      }
      const args = words.slice(i + 1).map(staticText)
      if (name === "eval") {
        if (args.some((arg) => arg === undefined)) findings.push({ kind: "dynamic-command", text: node.text })
        else findings.push(...parse(args.join(" ")))
        return
      }
      if (shells.has(name) && name !== "busybox") {
        const flag = args.findIndex((arg) => arg !== undefined && /^-[a-zA-Z]*c[a-zA-Z]*$/.test(arg))
        if (flag !== -1) {
          const code = args[flag + 1]
          if (code === undefined) findings.push({ kind: "dynamic-command", text: node.text })
          else findings.push(...parse(code))
          return
        }
        const operands = args.filter((arg) => arg === undefined || !arg.startsWith("-"))
        if (operands.length === 0) {
          // Commands from stdin: a here-document or here-string is code to read; a pipe is code nobody can see.
          const fed = redirects.filter((r) => r.type === "heredoc_redirect" || r.type === "herestring_redirect")
          for (const redirect of fed) {
            const body = redirect.type === "heredoc_redirect"
              ? redirect.namedChildren.find((child) => child?.type === "heredoc_body")?.text
              : (() => {
                const word = redirect.namedChildren.at(-1)
                return word === null || word === undefined ? undefined : staticText(word)
              })()
            if (body === undefined) findings.push({ kind: "dynamic-command", text: redirect.text })
            else findings.push(...parse(body))
          }
          if (piped && fed.length === 0) findings.push({ kind: "shell-from-pipe", text: node.text })
        }
        return
      }
      if (interpreters.has(name) || /^python[0-9.]*$/.test(name)) {
        const code = args.some((arg) => arg === undefined || forking.test(arg))
        if (code) findings.push({ kind: "interpreter-code", text: node.text })
        return
      }
      const wrapper = wrappers[name]
      if (wrapper === undefined) return
      // Skip the wrapper's options (and their values), its positional arguments and, for env, NAME=value pairs.
      let j = i + 1
      let positional = wrapper.positional
      while (j < words.length) {
        const word = staticText(words[j])
        if (word === undefined) break
        if (word === "--") {
          j++
          break
        }
        if (word.startsWith("-") && word.length > 1) {
          j += wrapper.withValue.has(word) ? 2 : 1
          continue
        }
        if (name === "env" && /^[A-Za-z_][A-Za-z0-9_]*=/.test(word)) {
          j++
          continue
        }
        if (positional > 0) {
          positional--
          j++
          continue
        }
        break
      }
      if (name === "busybox" && j < words.length) {
        // `busybox setsid …`, `busybox sh -c …`: the applet is the command.
        i = j
        continue
      }
      i = j
    }
  }

  const visit = (node: Node, piped: boolean, redirects: ReadonlyArray<Node>) => {
    const children = node.children
    for (let k = 0; k < children.length; k++) {
      const child = children[k]
      if (child === null) continue
      if (!child.isNamed) {
        if (child.type === "&") {
          const before = children.slice(0, k).reverse().find((c) => c !== null && c.isNamed)
          findings.push({ kind: "background", text: before?.text ?? "&" })
        }
        continue
      }
      switch (child.type) {
        case "command": {
          const words: Array<Node> = []
          for (const part of child.namedChildren) {
            if (part === null) continue
            if (part.type === "variable_assignment" || part.type.endsWith("_redirect")) continue
            words.push(part)
          }
          const own = child.namedChildren.filter((part): part is Node =>
            part !== null && part.type.endsWith("_redirect")
          )
          command(words, [...redirects, ...own], child, piped || node.type === "pipeline")
          // Command substitutions in its words, process substitutions, …
          visit(child, piped, [])
          break
        }
        case "redirected_statement": {
          const own = child.childrenForFieldName("redirect").filter((part): part is Node => part !== null)
          visit(child, piped || node.type === "pipeline", own)
          break
        }
        case "pipeline":
          visit(child, true, [])
          break
        default:
          visit(child, piped && child.type !== "subshell", child.type === "heredoc_redirect" ? [] : redirects)
      }
    }
  }
  visit(root, false, [])
  return findings
}

let loading: Promise<Parser> | undefined

/**
 * The bash parser, loaded once (the grammar is a WebAssembly module shipped by `tree-sitter-bash`).
 *
 * @internal
 */
export const parser = (): Promise<Parser> => {
  if (loading === undefined) {
    loading = (async () => {
      const { Language, Parser } = await import("web-tree-sitter")
      await Parser.init()
      const require = createRequire(import.meta.url)
      const language = await Language.load(require.resolve("tree-sitter-bash/tree-sitter-bash.wasm"))
      const instance = new Parser()
      instance.setLanguage(language)
      return instance as Parser
    })()
    loading.catch(() => {
      loading = undefined
    })
  }
  return loading
}

/** Nested shell code deeper than this is not parsed again: it is reported as unparsable. */
const maxDepth = 8

/** Parses a command line and returns its findings (synchronous once the parser is loaded). @internal */
export const findings = (instance: Parser, text: string, depth = 0): ReadonlyArray<Finding> => {
  if (depth > maxDepth) return [{ kind: "unparsable", text: text.slice(0, 200) }]
  const tree = instance.parse(text)
  if (tree === null) return [{ kind: "unparsable", text: text.slice(0, 200) }]
  try {
    return analyze(tree.rootNode, (nested) => findings(instance, nested, depth + 1))
  } finally {
    tree.delete()
  }
}
