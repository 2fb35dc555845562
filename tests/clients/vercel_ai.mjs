// emberd through the Vercel AI SDK (`ai` + `@ai-sdk/openai-compatible`):
// generateText and streamText on the chat and completion models. Usage:
//   node vercel_ai.mjs http://127.0.0.1:PORT/v1
// Exits non-zero on the first failed check. Texts are compared with each
// other (greedy), never with fixed strings: the model is random.
import assert from "node:assert/strict";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { generateText, streamText } from "ai";

const baseURL = process.argv[2];
const ok = (what) => console.log("ok -", what);
const models = await (await fetch(`${baseURL}/models`)).json();
const id = models.data[0].id;
const provider = createOpenAICompatible({ name: "ember", baseURL, apiKey: "unused", includeUsage: true });
const opts = { prompt: "Tell me about the sea.", maxOutputTokens: 12, temperature: 0, seed: 3, maxRetries: 0 };

const chat = await generateText({ model: provider.chatModel(id), ...opts });
assert.equal(typeof chat.text, "string");
assert.ok(["stop", "length"].includes(chat.finishReason), chat.finishReason);
assert.ok(chat.usage.inputTokens > 0 && chat.usage.outputTokens >= 1);
ok(`generateText (chat): ${chat.usage.outputTokens} tokens, ${chat.finishReason}`);

const s = streamText({ model: provider.chatModel(id), ...opts });
let text = "";
for await (const part of s.textStream) text += part;
assert.equal(text, chat.text);
assert.equal((await s.usage).outputTokens, chat.usage.outputTokens);
ok("streamText (chat): the same text and usage");

const cmpl = await generateText({ model: provider.completionModel(id), ...opts });
assert.equal(typeof cmpl.text, "string");
const cs = streamText({ model: provider.completionModel(id), ...opts });
let ctext = "";
for await (const part of cs.textStream) ctext += part;
assert.equal(ctext, cmpl.text);
ok("generateText / streamText (completion model)");
console.log("vercel ai sdk: all checks passed");
