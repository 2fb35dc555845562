// A tool-call round trip through the official OpenAI JavaScript SDK, as an
// agent loop does it: tools offered, the model's call read from
// message.tool_calls (and rebuilt from streamed deltas), the call and the
// tool's result sent back. Usage (emberd serving a template that shows
// tools, e.g. Qwen2.5's, run by test_openai_sdk.sh):
//   node openai_sdk_tools.mjs http://127.0.0.1:PORT/v1
// The model is random: shapes and validity are checked, not words.
import assert from "node:assert/strict";
import OpenAI from "openai";

const client = new OpenAI({ baseURL: process.argv[2], apiKey: "unused", maxRetries: 0, timeout: 60000 });
const ok = (what) => console.log("ok -", what);
const tools = [{
  type: "function",
  function: {
    name: "get_weather",
    description: "The weather in a city",
    parameters: {
      type: "object",
      properties: { city: { type: "string", maxLength: 10 }, days: { type: "integer", minimum: 1, maximum: 5 } },
      required: ["city", "days"],
    },
  },
}];
const messages = [{ role: "user", content: "What is the weather in Paris?" }];
const req = { messages, tools, tool_choice: "required", parallel_tool_calls: false, max_tokens: 120, seed: 4 };

const res = await client.chat.completions.create(req);
const msg = res.choices[0].message;
assert.equal(res.choices[0].finish_reason, "tool_calls");
assert.equal(msg.content, null);
assert.equal(msg.tool_calls.length, 1);
const call = msg.tool_calls[0];
assert.match(call.id, /^call_[0-9a-f]{24}$/);
assert.equal(call.type, "function");
assert.equal(call.function.name, "get_weather");
const args = JSON.parse(call.function.arguments);
assert.deepEqual(Object.keys(args).sort(), ["city", "days"]);
assert.ok(Number.isInteger(args.days) && args.days >= 1 && args.days <= 5);
ok(`tool call: ${call.function.name}(${call.function.arguments})`);

const stream = await client.chat.completions.create({ ...req, stream: true });
const calls = [];
let finish = null;
for await (const chunk of stream) {
  const ch = chunk.choices[0];
  if (!ch) continue;
  for (const d of ch.delta.tool_calls ?? []) {
    calls[d.index] ??= { id: "", name: "", arguments: "" };
    if (d.id) calls[d.index].id = d.id;
    if (d.function?.name) calls[d.index].name += d.function.name;
    if (d.function?.arguments) calls[d.index].arguments += d.function.arguments;
  }
  finish = ch.finish_reason ?? finish;
}
assert.equal(finish, "tool_calls");
assert.equal(calls.length, 1);
assert.equal(calls[0].name, call.function.name);
assert.equal(calls[0].arguments, call.function.arguments);
ok("streamed tool_calls deltas rebuild the same call");

const answer = await client.chat.completions.create({
  messages: [...messages, msg, { role: "tool", tool_call_id: call.id, content: JSON.stringify({ temp_c: 21 }) }],
  tools, max_tokens: 8, seed: 1,
});
assert.ok(["stop", "length", "tool_calls"].includes(answer.choices[0].finish_reason));
ok("assistant tool_calls and the tool's result go back: 200");

await assert.rejects(
  client.chat.completions.create({ messages, tools, tool_choice: { type: "function", function: { name: "nope" } } }),
  (e) => e instanceof OpenAI.BadRequestError && e.param === "tool_choice.function.name",
);
ok("a tool_choice naming no tool is a BadRequestError with param");
console.log("openai sdk tools: all checks passed");
