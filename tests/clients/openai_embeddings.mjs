// emberd's /v1/embeddings through the official OpenAI JavaScript SDK (which
// asks for base64 by default and decodes it), beside the float encoding.
// Usage: node openai_embeddings.mjs http://127.0.0.1:PORT/v1 MODEL_ID
import assert from "node:assert/strict";
import OpenAI from "openai";

const client = new OpenAI({ baseURL: process.argv[2], apiKey: "unused", maxRetries: 0, timeout: 60000 });
const model = process.argv[3];
const ok = (what) => console.log("ok -", what);

const b64 = await client.embeddings.create({ model, input: ["The sea is calm.", "Other words."] });
assert.equal(b64.data.length, 2);
assert.equal(b64.data[1].index, 1);
assert.ok(b64.usage.prompt_tokens > 0);
const flt = await client.embeddings.create({ model, input: "Other words.", encoding_format: "float" });
assert.equal(flt.data[0].embedding.length, b64.data[1].embedding.length);
for (let i = 0; i < flt.data[0].embedding.length; i++)
  assert.ok(Math.abs(flt.data[0].embedding[i] - b64.data[1].embedding[i]) < 1e-6);
ok(`embeddings.create: 2 x ${b64.data[0].embedding.length}, base64 (the SDK's default) = float, batch = single`);
await assert.rejects(client.embeddings.create({ model, input: "x", dimensions: 3 }), (e) => {
  assert.equal(e.status, 400);
  assert.equal(e.param, "dimensions");
  return true;
});
ok("embeddings.create dimensions: 400 naming it");
