// The live audit page. It polls api/summary once a second and redraws in
// place; it builds every element with textContent, never innerHTML, since
// audit records carry strings read from Kafka.
"use strict";

const DESCRIPTIONS = {
  duplicate: "the number was seen before within the dup window",
  renumbered: "the order (its source, or its --key) was seen before with another number: numbered twice",
  backwards: "the number is smaller than the previous number in the same partition",
  unknown_server: "the server ID is not one of the allowed servers",
  unknown_worker: "the worker ID is not one of the allowed workers",
  future: "the number's time is ahead of the auditor's clock by more than the allowed skew",
  lag: "the record's timestamp and the number's time are further apart than the allowed lag",
  invalid: "the record has no number, or one that does not decode",
};

const fmt = new Intl.NumberFormat("en-US");
const $ = (id) => document.getElementById(id);

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

function duration(ms) {
  if (ms % 3600000 === 0) return ms / 3600000 + "h";
  if (ms % 60000 === 0) return ms / 60000 + "m";
  if (ms % 1000 === 0) return ms / 1000 + "s";
  return ms + "ms";
}

function lagText(ms) {
  const a = Math.abs(ms);
  if (a >= 60000) return (ms / 60000).toFixed(1) + " min";
  if (a >= 1000) return (ms / 1000).toFixed(2) + " s";
  return Math.round(ms) + " ms";
}

// sparkline draws values (oldest first) into an <svg viewBox="0 0 120 28">.
function sparkline(svg, values) {
  const NS = "http://www.w3.org/2000/svg";
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  const lo = Math.min(0, ...values);
  const hi = Math.max(1, ...values);
  const y = (v) => 27 - ((v - lo) / (hi - lo)) * 26;
  if (lo < 0) {
    const zero = document.createElementNS(NS, "line");
    zero.setAttribute("x1", "0"); zero.setAttribute("x2", "120");
    zero.setAttribute("y1", y(0).toFixed(1)); zero.setAttribute("y2", y(0).toFixed(1));
    svg.appendChild(zero);
  }
  const step = values.length > 1 ? 120 / (values.length - 1) : 0;
  const line = document.createElementNS(NS, "polyline");
  line.setAttribute("points", values.map((v, i) => (i * step).toFixed(1) + "," + y(v).toFixed(1)).join(" "));
  svg.appendChild(line);
}

function recordRow(r) {
  const tr = el("tr");
  if (r.anomalies.length) tr.className = "flag";
  tr.dataset.id = r.id;
  tr.appendChild(el("td", r.time || "—"));
  tr.appendChild(el("td", r.id || "—"));
  tr.appendChild(el("td", r.id ? r.server : "", "num"));
  tr.appendChild(el("td", r.id ? r.worker : "", "num"));
  tr.appendChild(el("td", r.id ? r.sequence : "", "num"));
  tr.appendChild(el("td", r.topic + "/" + r.partition + "/" + r.offset));
  tr.appendChild(el("td", r.id ? fmt.format(r.lag_ms) : "", "num"));
  tr.appendChild(el("td", r.source || "—"));
  const an = el("td");
  if (r.anomalies.length === 0) an.appendChild(el("span", "clean", "clean"));
  for (const a of r.anomalies) {
    const b = el("span", a, "badge");
    b.title = DESCRIPTIONS[a] || "";
    an.appendChild(b);
  }
  const f = r.first_copy;
  if (f) {
    an.appendChild(el("span", "first " + f.topic + "/" + f.partition + "/" + f.offset + " #" + f.id, "first"));
  }
  tr.appendChild(an);
  return tr;
}

function fillRecords(id, records) {
  const body = $(id).querySelector("tbody");
  const rows = records.map(recordRow);
  body.replaceChildren(...rows);
  $(id + "-empty").hidden = rows.length > 0;
  $(id).hidden = rows.length === 0;
}

function fillKinds(s) {
  const box = $("kinds");
  if (box.childElementCount !== s.kinds.length) {
    box.replaceChildren();
    for (const k of s.kinds) {
      const d = el("div", null, "kind");
      d.title = DESCRIPTIONS[k] || "";
      const n = el("span", "0", "n");
      n.id = "anom-" + k;
      d.appendChild(n);
      d.appendChild(el("span", k, "k"));
      box.appendChild(d);
    }
  }
  for (const k of s.kinds) {
    const n = $("anom-" + k);
    const v = s.anomalies[k] || 0;
    n.textContent = fmt.format(v);
    n.parentElement.classList.toggle("bad", v > 0);
  }
}

function fillPairs(s) {
  const body = $("pairs").querySelector("tbody");
  const rows = (s.pairs || []).map((p) => {
    const tr = el("tr");
    tr.appendChild(el("td", p.server));
    tr.appendChild(el("td", p.worker));
    tr.appendChild(el("td", fmt.format(p.rate[p.rate.length - 1] || 0), "num"));
    const td = el("td");
    const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
    svg.setAttribute("viewBox", "0 0 120 28");
    svg.setAttribute("preserveAspectRatio", "none");
    svg.setAttribute("class", "spark");
    sparkline(svg, p.rate);
    td.appendChild(svg);
    tr.appendChild(td);
    tr.appendChild(el("td", fmt.format(p.total), "num"));
    return tr;
  });
  body.replaceChildren(...rows);
  $("pairs-empty").hidden = rows.length > 0;
  $("pairs").hidden = rows.length === 0;
}

function render(s) {
  const status = $("status");
  if (s.ready) {
    status.textContent = "not ready: " + s.ready;
    status.className = "status wait";
  } else {
    status.textContent = "live · " + new Date(s.now_ms).toLocaleTimeString();
    status.className = "status ok";
  }
  $("where").textContent = s.inputs.join(", ") + " → " + (s.audit_topic || "(no audit topic)") +
    " · group " + s.group + " · layout " + s.layout;

  $("audited").textContent = fmt.format(s.audited);
  $("audited-sub").textContent = s.last_batch_ms
    ? "last batch " + new Date(s.last_batch_ms).toLocaleTimeString() : "records";
  $("rate").textContent = fmt.format(s.rate[s.rate.length - 1] || 0);
  sparkline($("rate-spark"), s.rate);

  // Records and flags are two counts: a record with two anomalies is one
  // record and two flags.
  const flags = Object.values(s.anomalies).reduce((a, b) => a + b, 0);
  $("anomalies-total").textContent = fmt.format(s.flagged_records);
  $("anomaly-card").classList.toggle("bad", s.flagged_records > 0);
  const worst = s.kinds.filter((k) => s.anomalies[k] > 0).map((k) => k + " " + fmt.format(s.anomalies[k]));
  $("anomalies-sub").textContent = worst.length
    ? fmt.format(flags) + (flags === 1 ? " flag: " : " flags: ") + worst.join(" · ") : "none";

  // The audit records lag_ms, the record's timestamp minus the number's
  // time; the page shows the other way round, the numbering delay, which
  // is positive when the worker numbers what was produced before.
  const delays = s.lag_avg_ms.map((v) => -v);
  const delay = -(s.lag_avg_ms[s.lag_avg_ms.length - 1] || s.last_lag_ms || 0);
  $("lag").textContent = lagText(delay);
  sparkline($("lag-spark"), delays);
  $("lag-sub").textContent = delay < 0
    ? "below 0: numbers reserved ahead of their records (or passed through, or a producer clock ahead)"
    : "the number's time minus the record's timestamp";
  $("consumer-lag").textContent = fmt.format(s.consumer_lag);

  fillKinds(s);
  fillPairs(s);
  fillRecords("flagged", s.flagged);
  fillRecords("records", s.recent);

  const d = s.dup;
  $("config").textContent = "dup window " + duration(s.dup_window_ms) +
    (d.evictions > 0 ? " (effectively " + duration(d.effective_ms) + " after " + fmt.format(d.evictions) + " evictions)" : "") +
    " · " + fmt.format(d.entries) + " of " + fmt.format(d.max_entries) + " numbers held" +
    " · " + fmt.format(d.order_entries) + " orders held" +
    (d.order_evictions > 0 ? " (" + fmt.format(d.order_evictions) + " evictions)" : "") +
    " · unchecked " + fmt.format(d.unchecked) +
    " · max skew " + duration(s.max_skew_ms) + " · max lag " + (s.max_lag_ms ? duration(s.max_lag_ms) : "off") +
    " · servers " + (s.allowed_servers ? s.allowed_servers.join(",") : "any") +
    " · workers " + (s.allowed_workers ? s.allowed_workers.join(",") : "any") +
    " · renumbered by source" + (s.key ? " and " + s.key : "");
}

async function poll() {
  try {
    const res = await fetch("api/summary", { cache: "no-store" });
    if (!res.ok) throw new Error("HTTP " + res.status);
    render(await res.json());
  } catch (e) {
    const status = $("status");
    status.textContent = "disconnected: " + e.message;
    status.className = "status bad";
  } finally {
    setTimeout(poll, 1000);
  }
}

poll();
