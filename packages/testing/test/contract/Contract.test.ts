/**
 * The contract suite (suite.ts) for every provider: Claude Code (`ClaudeSession` on `MockClaude`, as each pinned CLI
 * version) and Codex (`CodexSession` on `MockCodex`). A new provider adds its adapter here.
 */
import { claude } from "./claude.ts"
import { codex } from "./codex.ts"
import { contract } from "./suite.ts"

for (const adapter of [...claude, codex]) contract(adapter)
