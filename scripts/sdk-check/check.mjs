// A tool-calling round trip through the official OpenAI and Anthropic Node
// SDKs, unchanged, against a running `pipe serve` (scripts/sdk-check.sh starts
// it). The base URL is argv[2] (http://host:port). The model has random
// weights, so every request forces a call (tool_choice "required" / "any"):
// the grammar makes the reply a valid call whatever the weights, and each
// check is on the shape the SDK parsed, not on words. Exit status 0 when every
// check passes; else the first failure is printed and the status is 1.
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";

const base = process.argv[2];
if (!base) {
  console.error("usage: node check.mjs http://HOST:PORT");
  process.exit(2);
}
const apiKey = process.env.SDK_CHECK_API_KEY ?? "sdk-check-key";

const weather = {
  name: "get_weather",
  description: "The weather in a city",
  parameters: {
    type: "object",
    properties: { city: { type: "string", enum: ["Paris", "Oslo", "Rome", "Lima"] } },
    additionalProperties: false,
    required: ["city"],
  },
};

function check(cond, what) {
  if (!cond) throw new Error(what);
}

// checkArgs: a call's arguments parse as JSON and carry the required field.
function checkArgs(args, where) {
  check(args !== null && typeof args === "object" && !Array.isArray(args), `${where}: arguments are not a JSON object: ${JSON.stringify(args)}`);
  check(typeof args.city === "string", `${where}: arguments lack the required string "city": ${JSON.stringify(args)}`);
}

async function openaiPlain(client) {
  const messages = [{ role: "user", content: "What is the weather in Paris?" }];
  const tools = [{ type: "function", function: weather }];
  const res = await client.chat.completions.create({ model: "any", messages, tools, tool_choice: "required", max_tokens: 1024, temperature: 0 });
  const choice = res.choices[0];
  check(choice.finish_reason === "tool_calls", `openai chat: finish_reason ${choice.finish_reason}, want tool_calls`);
  const calls = choice.message.tool_calls ?? [];
  check(calls.length >= 1, "openai chat: no tool_calls");
  const call = calls[0];
  check(call.type === "function" && call.function.name === "get_weather", `openai chat: call ${JSON.stringify(call)}`);
  check(typeof call.id === "string" && call.id !== "", "openai chat: the call has no id");
  checkArgs(JSON.parse(call.function.arguments), "openai chat");
  // the round trip: the call and its result go back in the history
  messages.push(choice.message, { role: "tool", tool_call_id: call.id, content: '{"temperature_c": 21}' });
  const next = await client.chat.completions.create({ model: "any", messages, max_tokens: 8, temperature: 0 });
  check(next.choices.length === 1 && next.usage.prompt_tokens > res.usage.prompt_tokens,
    `openai chat: the second turn's prompt (${next.usage?.prompt_tokens} tokens) does not hold the first (${res.usage?.prompt_tokens})`);
}

async function openaiStream(client) {
  const stream = await client.chat.completions.create({
    model: "any", stream: true, max_tokens: 1024, temperature: 0, tool_choice: "required",
    messages: [{ role: "user", content: "Weather in Oslo?" }], tools: [{ type: "function", function: weather }],
  });
  let name = "", args = "", finish = null, id = null;
  for await (const chunk of stream) {
    const c = chunk.choices[0];
    if (!c) continue;
    for (const tc of c.delta?.tool_calls ?? []) {
      check(tc.index === 0, `openai stream: tool call index ${tc.index}, want 0 only`);
      id ??= tc.id;
      name += tc.function?.name ?? "";
      args += tc.function?.arguments ?? "";
    }
    finish = c.finish_reason ?? finish;
  }
  check(finish === "tool_calls", `openai stream: finish_reason ${finish}, want tool_calls`);
  check(name === "get_weather" && id, `openai stream: call name ${JSON.stringify(name)} id ${id}`);
  checkArgs(JSON.parse(args), "openai stream");
}

async function anthropicPlain(client) {
  const tools = [{ name: weather.name, description: weather.description, input_schema: weather.parameters }];
  const messages = [{ role: "user", content: "What is the weather in Rome?" }];
  const msg = await client.messages.create({ model: "any", max_tokens: 1024, temperature: 0, tools, tool_choice: { type: "any", disable_parallel_tool_use: true }, messages });
  check(msg.type === "message" && msg.role === "assistant", `anthropic: not a message: ${JSON.stringify(msg)}`);
  check(msg.stop_reason === "tool_use", `anthropic: stop_reason ${msg.stop_reason}, want tool_use`);
  const use = msg.content.find((b) => b.type === "tool_use");
  check(use && use.name === "get_weather" && use.id, `anthropic: no get_weather tool_use block: ${JSON.stringify(msg.content)}`);
  checkArgs(use.input, "anthropic");
  messages.push({ role: "assistant", content: msg.content },
    { role: "user", content: [{ type: "tool_result", tool_use_id: use.id, content: "21 C" }] });
  const next = await client.messages.create({ model: "any", max_tokens: 8, temperature: 0, tools, messages });
  check(next.type === "message" && next.usage.input_tokens > msg.usage.input_tokens,
    `anthropic: the second turn's input (${next.usage?.input_tokens} tokens) does not hold the first (${msg.usage?.input_tokens})`);
}

async function anthropicStream(client) {
  const stream = client.messages.stream({
    model: "any", max_tokens: 1024, temperature: 0, tool_choice: { type: "any", disable_parallel_tool_use: true },
    tools: [{ name: weather.name, input_schema: weather.parameters }],
    messages: [{ role: "user", content: "Weather in Lima?" }],
  });
  const msg = await stream.finalMessage(); // the SDK assembles the events
  check(msg.stop_reason === "tool_use", `anthropic stream: stop_reason ${msg.stop_reason}, want tool_use`);
  const use = msg.content.find((b) => b.type === "tool_use");
  check(use && use.name === "get_weather", `anthropic stream: no get_weather tool_use block: ${JSON.stringify(msg.content)}`);
  checkArgs(use.input, "anthropic stream");
}

const oa = new OpenAI({ apiKey, baseURL: `${base}/v1`, maxRetries: 0, timeout: 120_000 });
const an = new Anthropic({ apiKey, baseURL: base, maxRetries: 0, timeout: 120_000 });
const checks = { "openai chat.completions tools": () => openaiPlain(oa), "openai chat.completions tools, streamed": () => openaiStream(oa),
  "anthropic messages tools": () => anthropicPlain(an), "anthropic messages tools, streamed": () => anthropicStream(an) };
let failed = 0;
for (const [name, run] of Object.entries(checks)) {
  try {
    await run();
    console.log(`ok   ${name}`);
  } catch (e) {
    failed++;
    console.log(`FAIL ${name}: ${e.message}`);
  }
}
console.log(`sdk-check: ${Object.keys(checks).length - failed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
