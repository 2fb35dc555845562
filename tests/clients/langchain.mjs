// emberd through LangChain JS (`@langchain/openai` ChatOpenAI): invoke,
// stream, and logprobs in the response metadata. Usage:
//   node langchain.mjs http://127.0.0.1:PORT/v1
// Exits non-zero on the first failed check; texts are compared with each
// other (greedy), never with fixed strings.
import assert from "node:assert/strict";
import { ChatOpenAI } from "@langchain/openai";

const baseURL = process.argv[2];
const ok = (what) => console.log("ok -", what);
const models = await (await fetch(`${baseURL}/models`)).json();
const model = models.data[0].id;
const llm = new ChatOpenAI({
  model, apiKey: "unused", configuration: { baseURL }, maxTokens: 12, temperature: 0, maxRetries: 0,
});

const res = await llm.invoke("Tell me about the sea.");
assert.equal(typeof res.content, "string");
assert.ok(res.usage_metadata.input_tokens > 0);
ok(`invoke: ${res.usage_metadata.output_tokens} tokens`);

let text = "";
for await (const chunk of await llm.stream("Tell me about the sea.")) text += chunk.content;
assert.equal(text, res.content);
ok("stream: the same text");

const lp = await new ChatOpenAI({
  model, apiKey: "unused", configuration: { baseURL }, maxTokens: 6, temperature: 0, maxRetries: 0,
  logprobs: true, topLogprobs: 2,
}).invoke("Tell me about the sea.");
const content = lp.response_metadata.logprobs.content;
assert.ok(content.length >= 1);
for (const e of content) {
  assert.ok(e.logprob <= 0);
  assert.equal(e.top_logprobs.length, 2);
}
ok(`logprobs: ${content.length} tokens with 2 alternatives each`);
console.log("langchain: all checks passed");
