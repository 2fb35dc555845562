// Ember's Jinja interpreter against the reference renderer
// (@huggingface/jinja, what Hugging Face checks chat templates with): every
// template in a directory, several conversations each, compared byte for
// byte. A conversation the reference refuses (raise_exception) must be
// refused by Ember too, with the same message.
//
// usage: node chat_templates.mjs EMBER_BINARY TEMPLATE_DIR
import { Template } from "@huggingface/jinja";
import { execFileSync } from "node:child_process";
import { readFileSync, readdirSync, writeFileSync, mkdtempSync } from "node:fs";
import { join } from "node:path";
import { tmpdir } from "node:os";

const [ember, dir] = process.argv.slice(2);
const work = mkdtempSync(join(tmpdir(), "tmpl-"));

const tools = [
  {
    type: "function",
    function: {
      name: "get_weather",
      description: "Weather at a place, now.",
      parameters: {
        type: "object",
        properties: { city: { type: "string", description: "City name" }, days: { type: "integer" } },
        required: ["city"],
      },
    },
  },
];

const conversations = [
  { name: "user only", messages: [{ role: "user", content: "Hello!" }] },
  {
    name: "system and turns",
    messages: [
      { role: "system", content: "You are a concise assistant.  " },
      { role: "user", content: "What is 2+2?" },
      { role: "assistant", content: "4." },
      { role: "user", content: "And 3+3?\nAnswer briefly." },
    ],
  },
  {
    name: "no system, ends with assistant",
    messages: [
      { role: "user", content: "  Spaces around  " },
      { role: "assistant", content: "Noted: \"quotes\", {braces}, naïve café 🚀." },
    ],
  },
  {
    name: "thinking",
    messages: [
      { role: "user", content: "Think first." },
      { role: "assistant", content: "<think>\nLet me see.\n</think>\n\nDone." },
      { role: "user", content: "Again." },
    ],
  },
  {
    name: "tool call and result",
    tools: true,
    messages: [
      { role: "system", content: "Use tools when needed." },
      { role: "user", content: "Weather in Paris?" },
      {
        role: "assistant",
        content: null,
        tool_calls: [
          { id: "call_1", type: "function", function: { name: "get_weather", arguments: { city: "Paris", days: 1 } } },
        ],
      },
      { role: "tool", tool_call_id: "call_1", content: "{\"temp_c\": 18, \"sky\": \"clear\"}" },
    ],
  },
];
// The same with an empty content where clients send null (Qwen3's template
// reads the content of every assistant message as a string).
conversations.push({
  ...conversations[4],
  name: "tool call, empty content",
  messages: conversations[4].messages.map((m) => (m.content === null ? { ...m, content: "" } : m)),
});

let pass = 0, fail = 0;
const files = readdirSync(dir).filter((f) => f.endsWith(".jinja")).sort();
if (files.length === 0) {
  console.log(`FAIL: no templates in ${dir}`);
  process.exit(1);
}
for (const file of files) {
  const source = readFileSync(join(dir, file), "utf8");
  const template = new Template(source);
  const usesTools = source.includes("tool_calls");
  for (const conv of conversations) {
    if (conv.tools && !usesTools) continue;
    for (const add_generation_prompt of [true, false]) {
      for (const extra of [{}, { enable_thinking: false }]) {
        if (extra.enable_thinking === false && !source.includes("enable_thinking")) continue;
        const context = {
          messages: conv.messages,
          add_generation_prompt,
          bos_token: "<s>",
          eos_token: "</s>",
          ...(conv.tools ? { tools } : {}),
          ...extra,
        };
        const label = `${file} / ${conv.name} / gen=${add_generation_prompt}${extra.enable_thinking === false ? " / no thinking" : ""}`;
        let want, wantErr;
        try {
          want = template.render(context);
        } catch (e) {
          wantErr = String(e.message);
        }
        const ctxPath = join(work, "ctx.json");
        writeFileSync(ctxPath, JSON.stringify(context));
        let got, gotErr;
        try {
          got = execFileSync(ember, ["template", `--file=${join(dir, file)}`, `--context=${ctxPath}`], {
            encoding: "utf8",
            stdio: ["ignore", "pipe", "pipe"],
          });
        } catch (e) {
          gotErr = String(e.stderr);
        }
        if (wantErr !== undefined) {
          // raise_exception's message is the template's own text: Ember must
          // give it word for word. Other refusals (a type error) need only
          // be refusals: the two interpreters word those differently.
          const own = source.includes(wantErr);
          if (gotErr !== undefined && (!own || gotErr.includes(wantErr))) {
            pass++;
          } else {
            fail++;
            console.log(`FAIL ${label}: reference refused (${wantErr}), Ember gave ${gotErr ?? JSON.stringify(got)}`);
          }
        } else if (gotErr !== undefined) {
          fail++;
          console.log(`FAIL ${label}: Ember failed: ${gotErr.trim()}`);
        } else if (got !== want) {
          fail++;
          let i = 0;
          while (i < got.length && got[i] === want[i]) i++;
          console.log(`FAIL ${label}: differs at char ${i}`);
          console.log(`  want: ${JSON.stringify(want.slice(Math.max(0, i - 40), i + 60))}`);
          console.log(`  got:  ${JSON.stringify(got.slice(Math.max(0, i - 40), i + 60))}`);
        } else {
          pass++;
        }
      }
    }
  }
}
console.log(`chat templates: ${files.length} templates, ${pass} renderings equal, ${fail} differ`);
process.exit(fail === 0 && pass > 0 ? 0 : 1);
