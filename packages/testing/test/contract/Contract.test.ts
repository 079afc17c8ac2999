/**
 * The contract suite (suite.ts) for every provider: Claude Code (`ClaudeSession` on `MockClaude`, as each pinned CLI
 * version), Codex (`CodexSession` on `MockCodex`) and any ACP agent (`AcpSession` on `MockAcp`). A new provider adds
 * its adapter here.
 */
import { acp } from "./acp.ts"
import { claude } from "./claude.ts"
import { codex } from "./codex.ts"
import { contract } from "./suite.ts"

for (const adapter of [...claude, codex, acp]) contract(adapter)
