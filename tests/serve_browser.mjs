// Headless Chromium drives the page of `mala serve`: picks a class, generates, watches the
// progress and the preview appear, waits for the results in the gallery, and saves a screenshot.
// Usage: node serve_browser.mjs PORT CHROMIUM SCREENSHOT.png
import puppeteer from "puppeteer-core";

const [port, chromium, shot] = process.argv.slice(2);
const browser = await puppeteer.launch({
  executablePath: chromium, headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],  // root in a container has no sandbox
});
try {
  const page = await browser.newPage();
  await page.setViewport({ width: 1100, height: 760 });
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  await page.goto(`http://127.0.0.1:${port}/`, { waitUntil: "networkidle0" });
  await page.waitForFunction(() => document.getElementById("classes").options.length === 10);
  await page.type("#cls", "Sneaker");
  await page.$eval("#steps", (e) => { e.value = "60"; });
  await page.$eval("#count", (e) => { e.value = "4"; });
  await page.select("#sampler", "DDIM");
  await page.click("#go");
  // the live preview and the progress bar while the job runs
  await page.waitForFunction(() => document.getElementById("preview").src.startsWith("data:image/png") &&
    document.getElementById("progress").value > 0, { timeout: 60000 });
  await page.waitForFunction(() => document.querySelectorAll("#gallery figure").length === 4, { timeout: 120000 });
  const caption = await page.$eval("#gallery figure figcaption", (e) => e.textContent);
  if (!caption.includes("Sneaker") || !caption.includes("Steps: 60")) throw new Error(`caption: ${caption}`);
  const err = await page.$eval("#error", (e) => e.textContent);
  if (err) throw new Error(`the page shows an error: ${err}`);
  if (errors.length) throw new Error(`script errors: ${errors.join("; ")}`);
  await page.screenshot({ path: shot });
  console.log(`chromium ${await browser.version()}: generated 4 images, preview and progress seen; screenshot ${shot}`);
} finally {
  await browser.close();
}
