// Package archs imports every architecture pipe can run, so that a program
// registers them all with one import (a family registers itself with
// family.Register from its package's init). Adding an architecture means
// adding its package here; nothing else in the engine or gen names it.
package archs

import (
	_ "github.com/pipe-engine/pipe/model/bailingmoe2" // registers bailingmoe2
	_ "github.com/pipe-engine/pipe/model/bailingmoe3" // registers bailingmoe3
	_ "github.com/pipe-engine/pipe/model/deepseek2"   // registers deepseek2
	_ "github.com/pipe-engine/pipe/model/deepseek4"   // registers deepseek4
	_ "github.com/pipe-engine/pipe/model/gemma4"      // registers gemma4
	_ "github.com/pipe-engine/pipe/model/glm4moe"     // registers glm4moe
	_ "github.com/pipe-engine/pipe/model/gptoss"      // registers gpt-oss
	_ "github.com/pipe-engine/pipe/model/lfm2moe"     // registers lfm2moe
	_ "github.com/pipe-engine/pipe/model/minimaxm2"   // registers minimax-m2
	_ "github.com/pipe-engine/pipe/model/nemotronh"   // registers nemotron_h_moe
	_ "github.com/pipe-engine/pipe/model/olmoe"       // registers olmoe
	_ "github.com/pipe-engine/pipe/model/qwen2moe"    // registers qwen2moe
	_ "github.com/pipe-engine/pipe/model/qwen35moe"   // registers qwen35moe
	_ "github.com/pipe-engine/pipe/model/qwen3moe"    // registers qwen3moe
	_ "github.com/pipe-engine/pipe/model/qwen3next"   // registers qwen3next
)
