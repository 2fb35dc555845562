// emberd through the official `ollama` JavaScript client: list, show, ps,
// generate and chat (streamed and not), embed, and an unknown model whose
// error string reaches the caller. Usage:
//   node ollama_client.mjs http://127.0.0.1:PORT MODEL_ID
// Exits non-zero on the first failed check. The model's weights are random
// (gibberish text), so texts are compared with each other, never with fixed
// strings.
import assert from "node:assert/strict";
import { Ollama } from "ollama";

const ollama = new Ollama({ host: process.argv[2] });
const id = process.argv[3];
const model = `${id}:latest`;
const ok = (what) => console.log("ok -", what);

const list = await ollama.list();
assert.equal(list.models.length, 1);
assert.equal(list.models[0].name, model);
assert.equal(list.models[0].details.format, "gguf");
assert.ok(list.models[0].size > 0);
ok(`list: ${list.models[0].name} (${list.models[0].details.family}, ${list.models[0].details.parameter_size})`);

const show = await ollama.show({ model });
assert.ok(show.capabilities.includes("completion") && show.capabilities.includes("embedding"));
assert.equal(typeof show.template, "string");
assert.ok(show.model_info["general.architecture"].length > 0);
ok("show");

const ps = await ollama.ps();
assert.equal(ps.models[0].name, model);
ok("ps");

const options = { num_predict: 8, seed: 3, temperature: 0.7, top_k: 20 };
const gen = await ollama.generate({ model, prompt: "Why is the sky blue?", options, stream: false });
assert.equal(gen.done, true);
assert.ok(["stop", "length"].includes(gen.done_reason));
assert.equal(typeof gen.response, "string");
assert.ok(gen.eval_count >= 1 && gen.eval_count <= 8);
assert.ok(gen.prompt_eval_count > 0 && gen.total_duration > 0);
ok(`generate: ${gen.eval_count} tokens, ${gen.done_reason}`);

let text = "";
let last;
for await (const part of await ollama.generate({ model, prompt: "Why is the sky blue?", options, stream: true })) {
  text += part.response;
  last = part;
}
assert.equal(last.done, true);
assert.equal(text, gen.response);
assert.equal(last.eval_count, gen.eval_count);
ok("generate stream: same text and counts as non-streamed");

const messages = [{ role: "system", content: "Be brief." }, { role: "user", content: "Hello!" }];
const chat = await ollama.chat({ model, messages, options, stream: false });
assert.equal(chat.message.role, "assistant");
assert.equal(typeof chat.message.content, "string");
assert.equal(chat.done, true);
ok(`chat: ${chat.eval_count} tokens`);

let ctext = "";
let clast;
for await (const part of await ollama.chat({ model, messages, options, stream: true })) {
  assert.equal(part.message.role, "assistant");
  ctext += part.message.content;
  clast = part;
}
assert.equal(clast.done, true);
assert.equal(ctext, chat.message.content);
ok("chat stream: same text as non-streamed");

const json = await ollama.chat({ model, messages, format: "json", options: { num_predict: 24 }, stream: false });
if (json.done_reason === "stop") JSON.parse(json.message.content);
ok(`chat format json: ${json.done_reason}`);

const emb = await ollama.embed({ model, input: ["first text", "second text"] });
assert.equal(emb.embeddings.length, 2);
const one = await ollama.embed({ model, input: "second text" });
assert.deepEqual(one.embeddings[0], emb.embeddings[1]);
const norm = Math.sqrt(emb.embeddings[0].reduce((s, x) => s + x * x, 0));
assert.ok(Math.abs(norm - 1) < 1e-5, `norm ${norm}`);
assert.ok(emb.prompt_eval_count > 0);
ok(`embed: 2 x ${emb.embeddings[0].length}, normalized, batch equals single`);

await assert.rejects(ollama.generate({ model: "no-such-model", prompt: "x", stream: false }), (e) => {
  assert.equal(e.name, "ResponseError");
  assert.equal(e.error, "model 'no-such-model' not found");
  assert.equal(e.status_code, 404);
  return true;
});
await assert.rejects(ollama.chat({ model, messages, options: { mirostat: 2 } }), (e) => {
  assert.match(e.error, /mirostat/);
  return true;
});
ok("errors: the server's message reaches the caller");
