// The official OpenAI SDK for Node against `mala serve`: images.generate through baseURL
// http://127.0.0.1:PORT/v1, as any OpenAI client would call it. Usage: node serve_openai.mjs PORT OUTDIR
import OpenAI from "openai";
import { writeFileSync } from "node:fs";

const [port, out] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: "unused-without---api-key" });
const models = await client.models.list();
const ids = models.data.map((m) => m.id);
if (!ids.includes("mala-dit-fmnist")) throw new Error(`models.list: ${ids}`);
const r = await client.images.generate({
  model: "mala-dit-fmnist", prompt: "Ankle boot", n: 2, size: "32x32", response_format: "b64_json",
});
if (r.data.length !== 2) throw new Error(`images.generate: ${r.data.length} images`);
r.data.forEach((d, i) => {
  const png = Buffer.from(d.b64_json, "base64");
  if (png.subarray(1, 4).toString() !== "PNG") throw new Error(`image ${i} is not a PNG`);
  writeFileSync(`${out}/openai-${i}.png`, png);
});
try {  // a mistake comes back as the SDK's error with the server's message
  await client.images.generate({ model: "mala-dit-fmnist", prompt: "Snekaer", size: "32x32" });
  throw new Error("an unknown class was accepted");
} catch (e) {
  if (!(e instanceof OpenAI.APIError) || e.status !== 400 || !String(e.message).includes("unknown class"))
    throw e;
}
console.log(`openai ${OpenAI.VERSION ?? ""}: images.generate made ${r.data.length} PNGs (created ${r.created}); ` +
  "an unknown class answered 400");
