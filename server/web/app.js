// The page of `mala serve`: fills the form from /sdapi/v1/sd-models and /sdapi/v1/samplers, runs
// each generation as an async job (/mala/v1/jobs), polls its progress and preview, and keeps the
// results with their parameters. An API key, when the server asks for one, is kept in localStorage.
"use strict";
const $ = (id) => document.getElementById(id);
let models = [], job = null, polling = null, initBytes = null, maskPainted = false;

function headers() {
  const h = { "Content-Type": "application/json" };
  const key = localStorage.getItem("mala-api-key");
  if (key) h.Authorization = "Bearer " + key;
  return h;
}

async function api(method, path, body) {
  for (let attempt = 0; attempt < 2; attempt++) {
    const r = await fetch(path, { method, headers: headers(), body: body ? JSON.stringify(body) : undefined });
    if (r.status === 401 && attempt === 0) {
      const key = prompt("This server needs an API key:");
      if (key === null) break;
      localStorage.setItem("mala-api-key", key);
      continue;
    }
    const data = await r.json();
    if (!r.ok) throw new Error(data.error ? data.error.message : r.statusText);
    return data;
  }
  throw new Error("no API key");
}

function showError(e) { $("error").textContent = e ? String(e.message || e) : ""; }

function fillClasses() {
  const m = models[$("model").selectedIndex];
  const list = $("classes");
  list.innerHTML = "";
  for (const c of m.classes) { const o = document.createElement("option"); o.value = c; list.appendChild(o); }
  $("cls").disabled = $("cls2").disabled = !m.classes.length;
  $("status").textContent = `${models.length} model${models.length > 1 ? "s" : ""}; ${m.model_name}: ${m.backbone}, ` +
    `${m.classes.length} classes, ${m.width}x${m.height}`;
  resetCanvas();
}

async function init() {
  try {
    models = await api("GET", "/sdapi/v1/sd-models");
    for (const m of models) { const o = document.createElement("option"); o.textContent = m.model_name; $("model").appendChild(o); }
    const samplers = await api("GET", "/sdapi/v1/samplers");
    for (const s of samplers) { const o = document.createElement("option"); o.value = s.name; o.textContent = s.name; $("sampler").appendChild(o); }
    fillClasses();
  } catch (e) { showError(e); $("status").textContent = "not connected"; }
}

function promptText() {
  const a = $("cls").value.trim(), b = $("cls2").value.trim();
  if ($("blendbox").open && a && b) {
    const w = Number($("blendw").value);
    return `${(1 - w).toFixed(3)} ${a} + ${w.toFixed(3)} ${b}`;
  }
  return a;
}

// ---- image to image: the input drawn on a canvas, the mask painted over it ----
const paint = $("paint"), pctx = paint.getContext("2d");
let mask = document.createElement("canvas"), mctx = mask.getContext("2d"), drawing = false, inputImg = null;

function resetCanvas() {
  const m = models[$("model").selectedIndex];
  if (!m) return;
  mask.width = m.width; mask.height = m.height;
  mctx.fillStyle = "#000"; mctx.fillRect(0, 0, mask.width, mask.height);
  maskPainted = false;
  redraw();
}
function redraw() {
  pctx.clearRect(0, 0, paint.width, paint.height);
  if (inputImg) pctx.drawImage(inputImg, 0, 0, paint.width, paint.height);
  pctx.globalAlpha = 0.55;
  pctx.globalCompositeOperation = "lighter";
  pctx.drawImage(mask, 0, 0, paint.width, paint.height);
  pctx.globalAlpha = 1;
  pctx.globalCompositeOperation = "source-over";
}
function stroke(ev) {
  const r = paint.getBoundingClientRect();
  const x = (ev.clientX - r.left) / r.width * mask.width, y = (ev.clientY - r.top) / r.height * mask.height;
  mctx.fillStyle = "#fff";
  mctx.beginPath();
  mctx.arc(x, y, Number($("brush").value) / paint.width * mask.width / 2, 0, 2 * Math.PI);
  mctx.fill();
  maskPainted = true;
  redraw();
}
paint.addEventListener("pointerdown", (e) => { drawing = true; stroke(e); });
paint.addEventListener("pointermove", (e) => { if (drawing) stroke(e); });
window.addEventListener("pointerup", () => { drawing = false; });
$("clearmask").onclick = resetCanvas;
$("initfile").onchange = async () => {
  const f = $("initfile").files[0];
  if (!f) { initBytes = null; inputImg = null; redraw(); return; }
  initBytes = await new Promise((ok) => { const r = new FileReader(); r.onload = () => ok(r.result); r.readAsDataURL(f); });
  inputImg = new Image();
  inputImg.onload = redraw;
  inputImg.src = initBytes;
};
$("strength").oninput = () => { $("strengthv").value = $("strength").value; };
$("blendw").oninput = () => { $("blendwv").value = $("blendw").value; };
$("model").onchange = fillClasses;

// ---- a generation ----
function request() {
  const body = {
    model: $("model").value, prompt: promptText(), cfg_scale: Number($("cfg").value), steps: Number($("steps").value),
    sampler_name: $("sampler").value, seed: Number($("seed").value), batch_size: Number($("count").value),
  };
  if ($("initbox").open && initBytes) {
    body.init_images = [initBytes];
    body.denoising_strength = Number($("strength").value);
    if (maskPainted) body.mask = mask.toDataURL("image/png");
  }
  return body;
}

function setBusy(busy) {
  $("go").disabled = busy;
  $("cancel").disabled = !busy;
}

function addResults(j) {
  const info = JSON.parse(j.info);
  j.images.forEach((b64, i) => {
    const fig = document.createElement("figure");
    const img = document.createElement("img");
    img.src = "data:image/png;base64," + b64;
    img.alt = info.infotexts[i].split("\n")[0];
    const a = document.createElement("a");
    a.href = img.src;
    a.download = `${j.id}-${String(i).padStart(2, "0")}.png`;
    a.textContent = "download";
    const cap = document.createElement("figcaption");
    cap.textContent = info.infotexts[i];
    fig.append(img, a, cap);
    $("gallery").prepend(fig);
  });
}

async function poll() {
  try {
    const j = await api("GET", "/mala/v1/jobs/" + job);
    $("progress").value = j.progress;
    $("progresstext").textContent = `${j.state}: step ${j.step} of ${j.steps}, batch ${j.batch + 1} of ${j.batches}`;
    if (j.preview) $("preview").src = "data:image/png;base64," + j.preview;
    if (j.state === "done" || j.state === "failed" || j.state === "cancelled") {
      clearInterval(polling);
      setBusy(false);
      if (j.state === "done") { addResults(j); $("preview").src = "data:image/png;base64," + j.images[0]; }
      else showError(j.error ? j.error.message : j.state);
    }
  } catch (e) { clearInterval(polling); setBusy(false); showError(e); }
}

$("form").onsubmit = async (ev) => {
  ev.preventDefault();
  showError(null);
  try {
    setBusy(true);
    const j = await api("POST", "/mala/v1/jobs", request());
    job = j.id;
    polling = setInterval(poll, 250);
  } catch (e) { setBusy(false); showError(e); }
};
$("cancel").onclick = async () => { if (job) { try { await api("POST", `/mala/v1/jobs/${job}/cancel`, {}); } catch (e) { showError(e); } } };

init();
