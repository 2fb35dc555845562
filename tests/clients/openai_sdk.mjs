// emberd through the official OpenAI JavaScript SDK: chat.completions.create
// with and without stream, completions.create, and an API error. Usage:
//   node openai_sdk.mjs http://127.0.0.1:PORT/v1
// Exits non-zero on the first failed check. The model is random (gibberish
// text), so texts are compared with each other, never with fixed strings.
import assert from "node:assert/strict";
import OpenAI from "openai";

const client = new OpenAI({ baseURL: process.argv[2], apiKey: "unused", maxRetries: 0, timeout: 60000 });
const messages = [{ role: "user", content: "Tell me about the sea." }];
const ok = (what) => console.log("ok -", what);

const models = await client.models.list();
const model = models.data[0].id;
ok(`models.list: ${model}`);

const chat = await client.chat.completions.create({ model, messages, max_tokens: 16, seed: 9 });
assert.equal(chat.object, "chat.completion");
assert.match(chat.id, /^chatcmpl-/);
assert.equal(chat.choices.length, 1);
assert.equal(chat.choices[0].message.role, "assistant");
assert.equal(typeof chat.choices[0].message.content, "string");
assert.ok(["stop", "length"].includes(chat.choices[0].finish_reason));
assert.equal(chat.usage.total_tokens, chat.usage.prompt_tokens + chat.usage.completion_tokens);
ok("chat.completions.create");

const stream = await client.chat.completions.create({
  model, messages, max_tokens: 16, seed: 9, stream: true, stream_options: { include_usage: true },
});
const chunks = [];
for await (const c of stream) chunks.push(c);
assert.ok(chunks.length >= 3, "role, finish and usage chunks at least");
assert.deepEqual(chunks[0].choices[0].delta, { role: "assistant", content: "" });
const fin = chunks[chunks.length - 2];
assert.deepEqual(fin.choices[0].delta, {});
assert.equal(fin.choices[0].finish_reason, chat.choices[0].finish_reason);
const last = chunks[chunks.length - 1];
assert.deepEqual(last.choices, []);
for (const k of ["prompt_tokens", "completion_tokens", "total_tokens"]) assert.equal(last.usage[k], chat.usage[k]);
const text = chunks.slice(1, -2).map((c) => c.choices[0].delta.content).join("");
assert.equal(text, chat.choices[0].message.content);
ok(`chat stream: ${chunks.length} chunks, same text and usage as non-streamed`);

const cmpl = await client.completions.create({ model, prompt: "Once upon a time", max_tokens: 8, seed: 2 });
assert.equal(cmpl.object, "text_completion");
assert.equal(typeof cmpl.choices[0].text, "string");
assert.ok(cmpl.usage.completion_tokens >= 1 && cmpl.usage.completion_tokens <= 8);
const cstream = await client.completions.create({ model, prompt: "Once upon a time", max_tokens: 8, seed: 2, stream: true });
let ctext = "";
for await (const c of cstream) if (c.choices.length) ctext += c.choices[0].text;
assert.equal(ctext, cmpl.choices[0].text);
ok("completions.create, streamed and not");

await assert.rejects(
  client.chat.completions.create({ model, messages, temperature: 5 }),
  (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && e.param === "temperature",
);
ok("a bad request is a BadRequestError with param");
// issue 19: logprobs, echo, models.retrieve, the routes without /v1
const lchat = await client.chat.completions.create({
  model, messages, max_tokens: 6, temperature: 0, logprobs: true, top_logprobs: 3,
});
const entries = lchat.choices[0].logprobs.content;
assert.ok(entries.length >= 1);
for (const e of entries) {
  assert.equal(typeof e.token, "string");
  assert.ok(e.logprob <= 0 && Array.isArray(e.bytes));
  assert.equal(e.top_logprobs.length, 3);
  assert.ok(Math.abs(e.logprob - e.top_logprobs[0].logprob) < 1e-4, "greedy: the top one");
}
const lstream = await client.chat.completions.create({
  model, messages, max_tokens: 6, temperature: 0, logprobs: true, top_logprobs: 3, stream: true,
});
const sentries = [];
for await (const c of lstream) if (c.choices.length && c.choices[0].logprobs) sentries.push(...c.choices[0].logprobs.content);
assert.deepEqual(sentries.map((e) => e.bytes), entries.map((e) => e.bytes));
ok(`chat logprobs, streamed and not: ${entries.length} tokens`);

const lc = await client.completions.create({ model, prompt: "Once upon a time", max_tokens: 5, temperature: 0, logprobs: 2 });
const l = lc.choices[0].logprobs;
assert.equal(l.tokens.length, l.token_logprobs.length);
assert.equal(l.tokens.length, l.text_offset.length);
assert.equal(l.tokens.length, l.top_logprobs.length);
ok("completions logprobs: tokens, token_logprobs, top_logprobs, text_offset");

const echo = await client.completions.create({ model, prompt: "Once upon a time", max_tokens: 5, temperature: 0, echo: true });
const plain = await client.completions.create({ model, prompt: "Once upon a time", max_tokens: 5, temperature: 0 });
assert.equal(echo.choices[0].text, "Once upon a time" + plain.choices[0].text);
ok("echo");

const m = await client.models.retrieve(model);
assert.equal(m.id, model);
assert.ok(m.meta.n_ctx_train > 0 && m.meta.n_vocab > 0 && m.meta.n_params > 0 && m.meta.size > 0);
await assert.rejects(client.models.retrieve("gpt-4o"), (e) => e instanceof OpenAI.NotFoundError && e.status === 404);
ok("models.retrieve with meta; an unknown model is NotFoundError");

const bare = new OpenAI({ baseURL: process.argv[2].replace(/\/v1$/, ""), apiKey: "unused", maxRetries: 0 });
assert.equal((await bare.models.list()).data[0].id, model);
const bchat = await bare.chat.completions.create({ model, messages, max_tokens: 4, temperature: 0 });
assert.equal(bchat.object, "chat.completion");
const bcmpl = await bare.completions.create({ model, prompt: "Once", max_tokens: 4, temperature: 0 });
assert.equal(bcmpl.object, "text_completion");
ok("routes without /v1: models, chat, completions");

await assert.rejects(
  client.chat.completions.create({ model, messages, store: true }),
  (e) => e instanceof OpenAI.BadRequestError && e.param === "store",
);
ok("an unsupported field is a BadRequestError naming it");
console.log("openai sdk: all checks passed");
