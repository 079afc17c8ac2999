/**
 * A vitest reporter that ends the run with one plain line, `N passed, N failed` (and skipped), so that a CI
 * reading only the last lines knows how many tests ran.
 */
import type { Reporter, TestModule } from "vitest/node"

export default class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>) {
    let passed = 0
    let failed = 0
    let skipped = 0
    for (const module of testModules) {
      for (const test of module.children.allTests()) {
        const state = test.result().state
        if (state === "passed") passed++
        else if (state === "failed") failed++
        else if (state === "skipped") skipped++
      }
      if (module.state() === "failed" && [...module.children.allTests()].length === 0) failed++
    }
    process.stdout.write(`\nTests: ${passed} passed, ${failed} failed, ${skipped} skipped\n`)
  }
}
