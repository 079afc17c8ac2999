/**
 * Whether a file is a program this machine can start, checked before spawning it, so that a `claude` that is
 * not one (a stub left by an install without its platform package, a binary for another architecture, a
 * script whose interpreter is missing, a text file) fails with a reason instead of an early exit whose cause
 * is lost. (Without the check, Node runs a file with no `#!` line through /bin/sh, and a script whose
 * interpreter is missing fails with an ENOENT that names the script, which exists.)
 */
import * as Fs from "node:fs"
import * as Path from "node:path"

/** ELF `e_machine` values of the architectures Node runs on. */
const elfMachines: Readonly<Record<string, number>> = {
  x64: 62,
  arm64: 183,
  ia32: 3,
  arm: 40,
  ppc64: 21,
  s390x: 22,
  riscv64: 243,
  loong64: 258
}

const machineNames: Readonly<Record<number, string>> = Object.fromEntries(
  Object.entries(elfMachines).map(([name, machine]) => [machine, name])
)

/** What the first bytes of a file say about it (pure). @internal */
export type Header =
  | { readonly _tag: "Native" }
  | { readonly _tag: "Script"; readonly interpreter: string; readonly argument: string | undefined }
  | { readonly _tag: "NotRunnable"; readonly reason: string }

/** Reads what a file's first bytes say (pure: the bytes, the platform and the architecture). @internal */
export const classify = (head: Uint8Array, platform: string, arch: string): Header => {
  if (head.length >= 20 && head[0] === 0x7f && head[1] === 0x45 && head[2] === 0x4c && head[3] === 0x46) {
    if (platform !== "linux" && platform !== "freebsd" && platform !== "openbsd" && platform !== "netbsd") {
      return { _tag: "NotRunnable", reason: `it is an ELF binary, which ${platform} cannot run` }
    }
    // e_machine: 2 bytes at offset 18, in the byte order of EI_DATA (1: little, 2: big endian).
    const machine = head[5] === 2 ? (head[18] << 8) | head[19] : head[18] | (head[19] << 8)
    const expected = elfMachines[arch]
    if (expected !== undefined && machine !== expected) {
      return {
        _tag: "NotRunnable",
        reason: `it is a binary for ${machineNames[machine] ?? `ELF machine ${machine}`}, and this machine is ${arch}`
      }
    }
    return { _tag: "Native" }
  }
  if (head.length >= 4) {
    const magic = ((head[0] << 24) | (head[1] << 16) | (head[2] << 8) | head[3]) >>> 0
    const macho = [0xfeedface, 0xfeedfacf, 0xcefaedfe, 0xcffaedfe, 0xcafebabe, 0xbebafeca]
    if (macho.includes(magic)) {
      return platform === "darwin"
        ? { _tag: "Native" }
        : { _tag: "NotRunnable", reason: `it is a macOS (Mach-O) binary, which ${platform} cannot run` }
    }
  }
  if (head.length >= 2 && head[0] === 0x23 && head[1] === 0x21) {
    const end = head.indexOf(0x0a)
    const line = Buffer.from(head.subarray(2, end === -1 ? head.length : end)).toString("latin1").trim()
    const [interpreter, ...rest] = line.split(/[ \t]+/)
    if (interpreter === undefined || interpreter.length === 0) {
      return { _tag: "NotRunnable", reason: "its #! line names no interpreter" }
    }
    return { _tag: "Script", interpreter, argument: rest.length === 0 ? undefined : rest.join(" ") }
  }
  const shown = Buffer.from(head.subarray(0, 16)).toString("latin1").replace(/[^\x20-\x7e]/g, ".")
  return {
    _tag: "NotRunnable",
    reason: `it starts with neither #! nor a native executable header (it starts with "${shown}")`
  }
}

/** Whether `file` is a regular file this process may execute. @internal */
export const isExecutableFile = (file: string): boolean => {
  try {
    if (!Fs.statSync(file).isFile()) return false
    Fs.accessSync(file, Fs.constants.X_OK)
    return true
  } catch {
    return false
  }
}

/** The first executable file `name` on `pathVar`, as `execvp` finds it. @internal */
export const onPath = (name: string, pathVar: string | undefined): string | undefined => {
  for (const dir of (pathVar ?? "").split(Path.delimiter)) {
    if (dir.length === 0) continue
    const file = Path.resolve(dir, name)
    if (isExecutableFile(file)) return file
  }
  return undefined
}

/**
 * Why `file` cannot be started with this `PATH` (the child's), or undefined when it can (as far as can be told
 * without starting it). Not checked on Windows.
 *
 * @internal
 */
export const check = (file: string, pathVar: string | undefined, depth = 0): string | undefined => {
  if (process.platform === "win32") return undefined
  let head: Buffer
  try {
    const fd = Fs.openSync(file, "r")
    try {
      head = Buffer.alloc(256)
      head = head.subarray(0, Fs.readSync(fd, head, 0, head.length, 0))
    } finally {
      Fs.closeSync(fd)
    }
  } catch (error) {
    return `${file} cannot be read (${(error as NodeJS.ErrnoException).code ?? String(error)})`
  }
  const header = classify(head, process.platform, process.arch)
  if (header._tag === "NotRunnable") return `${file} is not a runnable program: ${header.reason}`
  if (header._tag === "Native") return undefined
  if (!isExecutableFile(header.interpreter)) {
    return `${file} is not a runnable program: its interpreter ${header.interpreter} (#! line) is missing or not executable`
  }
  // `#!/usr/bin/env node`: the program env runs is looked up on the child's PATH.
  if (Path.basename(header.interpreter) === "env" && header.argument !== undefined && depth === 0) {
    const program = header.argument.split(/[ \t]+/).find((word) => !word.startsWith("-") && !word.includes("="))
    if (program !== undefined && !program.includes("/") && onPath(program, pathVar) === undefined) {
      return `${file} is not a runnable program: its #! line runs ${program} through env, and ${program} is not ` +
        `on the PATH it gets`
    }
  }
  return undefined
}
