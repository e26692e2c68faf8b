// Package toolcall reads tool calls out of a model's generated text, and
// writes the grammar that forces one, per chat-template family, as
// llama.cpp's common/chat (3f545becc) does for llama-server.
//
// Detect names a template's Format from its source. Format.Parse splits a
// generation into its content and its calls:
//
//   - Hermes (Qwen2.5, Qwen3, Qwen3-Next, Ling 2.0, Hermes 2/3, and ChatML templates):
//     <tool_call>{"name": …, "arguments": {…}}</tool_call>
//   - QwenXML (Qwen3-Coder, Qwen3.5/3.6, Nemotron 3):
//     <tool_call><function=NAME><parameter=P>value</parameter></function></tool_call>
//   - GLM (GLM-4.5/4.6/4.7, Ling 3.0): <tool_call>NAME<arg_key>k</arg_key><arg_value>v</arg_value></tool_call>
//   - DeepSeek (V3.1 and R1): <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{…}<｜tool▁call▁end｜>…
//   - Mistral: [TOOL_CALLS][{…}, …] (Nemo); MistralArgs: [TOOL_CALLS]NAME[ARGS]{…} (Ministral 3,
//     Devstral, Mistral Small 3.2); each parses both
//   - Llama3 (Llama 3.1/3.2/3.3): a whole answer {"name": …, "parameters": {…}}
//   - Harmony (gpt-oss): <|channel|>commentary to=functions.NAME … <|message|>{…}<|call|>
//   - Gemma4: <|tool_call>call:NAME{key:<|"|>text<|"|>,n:1}<tool_call|>
//   - MiniMaxM2 (MiniMax-M2): <minimax:tool_call><invoke name="NAME"><parameter name="k">v</parameter></invoke>…</minimax:tool_call>
//   - Generic (any other template): {"tool_call": {"name", "arguments"}}, {"tool_calls": […]} or {"response": …}
//
// A parameter value in the XML formats is a string where the tool's schema
// says so, else JSON when it parses as JSON. Arguments are returned as
// compact JSON text. Format.Grammar is the GBNF (sample/grammar syntax) of
// one call (or several with parallel calls) of the given tools, their
// arguments constrained by their parameter schemas; Format.Triggers are the
// words that start a call, for a lazy grammar under tool_choice "auto".
package toolcall
