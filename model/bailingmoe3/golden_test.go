package bailingmoe3_test

import (
	"testing"

	"github.com/pipe-engine/pipe/decode/goldenruns"
)

// TestGoldenRuns holds the bailingmoe3 golden runs
// (testdata/golden/README.md, section 18): tiny-bailingmoe3-{F32,Q4_K_M},
// `pipe gen --preset bailingmoe3-tiny --seed 73412` quantized by
// llama-quantize and run by llama.cpp through testdata/golden/tools,
// against the library decode loop on the engine (streaming at one and two
// threads, mmap'd, a 1 MiB cache), with the bounds every family's golden
// runs use (goldenruns.Check): F32 within 2.4e-7, Q4_K_M within 7.4e-3
// (single steps; section 18), every greedy token equal to llama.cpp's.
func TestGoldenRuns(t *testing.T) {
	goldenruns.Check(t, golden, "tiny-bailingmoe3-F32", "tiny-bailingmoe3-Q4_K_M")
}
