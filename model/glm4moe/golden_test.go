package glm4moe_test

import (
	"testing"

	"github.com/pipe-engine/pipe/decode/goldenruns"
)

// TestGoldenRuns holds the glm4moe golden runs (testdata/golden/README.md,
// section 14): tiny-glm4moe-{F32,Q4_K_M}, `pipe gen --preset glm4moe-tiny
// --seed 3232` quantized by llama-quantize and run by llama.cpp through
// testdata/golden/tools, against the library decode loop on the engine,
// with the bounds every family's golden runs use (goldenruns.Check).
func TestGoldenRuns(t *testing.T) {
	goldenruns.Check(t, golden, "tiny-glm4moe-F32", "tiny-glm4moe-Q4_K_M")
}
