// Prints the path of the fake claude that @tether/testing ships, resolved as the application resolves the package.
import { FakeClaude } from "@tether/testing"

console.log(FakeClaude.path)
