// A small PromQL completer on the label APIs, as vmui has: functions,
// metric names, label names and label values, from the cursor's context.
import { html } from "htm/preact";
import { useEffect, useRef, useState } from "preact/hooks";
import { api } from "./util.js";

const FUNCS = ("abs absent absent_over_time avg_over_time ceil changes clamp clamp_max clamp_min count_over_time day_of_month day_of_week " +
  "day_of_year days_in_month deg delta deriv exp floor histogram_avg histogram_count histogram_fraction histogram_quantile histogram_stddev " +
  "histogram_stdvar histogram_sum holt_winters hour idelta increase irate label_join label_replace last_over_time ln log10 log2 mad_over_time " +
  "max_over_time min_over_time minute month predict_linear present_over_time quantile_over_time rad rate resets round scalar sgn sort " +
  "sort_by_label sort_by_label_desc sort_desc sqrt stddev_over_time stdvar_over_time sum_over_time time timestamp vector year " +
  "sum avg min max count stddev stdvar topk bottomk quantile count_values group limitk limit_ratio").split(" ");
const KEYWORDS = "by without on ignoring group_left group_right offset bool and or unless".split(" ");

// context finds what the word at the cursor is: a metric/function, a
// label name inside {...}, or a label value after label=".
function context(text, pos) {
  const before = text.slice(0, pos);
  const v = /([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"([^"]*)$/.exec(before);
  const open = before.lastIndexOf("{"), close = before.lastIndexOf("}");
  const metric = open > close ? (/([a-zA-Z_:][a-zA-Z0-9_:]*)\s*$/.exec(before.slice(0, open)) || [])[1] : undefined;
  if (v && open > close) return { kind: "value", label: v[1], prefix: v[3], metric };
  const w = /([a-zA-Z_:][a-zA-Z0-9_:]*)$/.exec(before);
  const prefix = w ? w[1] : "";
  if (open > close) return { kind: "label", prefix, metric };
  if (/\b(by|without|on|ignoring)\s*\([^)]*$/.test(before)) return { kind: "label", prefix };
  return { kind: "name", prefix };
}

export function Completer({ value, onInput, onRun }) {
  const ta = useRef(null);
  const [items, setItems] = useState([]);
  const [sel, setSel] = useState(0);
  const cache = useRef({});
  const cached = (key, path, qs) => {
    if (!cache.current[key]) cache.current[key] = api(path, qs).then(({ data }) => data || []).catch(() => []);
    return cache.current[key];
  };
  // Metric names are asked for at once; a suggestion typed before they
  // arrive waits for them (suggestions resolve in the order typed).
  const metricNames = () => cached("names", "/api/v1/label/__name__/values");
  useEffect(() => { metricNames(); }, []);
  const latest = useRef(0);
  const suggest = async (force) => {
    const el = ta.current;
    const c = context(el.value, el.selectionStart);
    const seq = ++latest.current; // only the last keystroke's list is shown
    if (!force && c.prefix.length < 1) { setItems([]); return; }
    let list;
    if (c.kind === "value") {
      const qs = c.metric ? { "match[]": c.metric } : undefined;
      list = (await cached("v:" + c.label + ":" + c.metric, `/api/v1/label/${encodeURIComponent(c.label)}/values`, qs)).map((x) => ({ text: x, kind: "value" }));
    } else if (c.kind === "label") {
      const qs = c.metric ? { "match[]": c.metric } : undefined;
      list = (await cached("l:" + c.metric, "/api/v1/labels", qs)).map((x) => ({ text: x, kind: "label" }));
    } else {
      const names = await metricNames();
      list = [...FUNCS.map((f) => ({ text: f, kind: "function" })), ...KEYWORDS.map((k) => ({ text: k, kind: "keyword" })), ...names.map((n) => ({ text: n, kind: "metric" }))];
    }
    if (seq !== latest.current) return;
    const p = c.prefix.toLowerCase();
    const hits = list.filter((x) => x.text.toLowerCase().startsWith(p)).concat(p ? list.filter((x) => !x.text.toLowerCase().startsWith(p) && x.text.toLowerCase().includes(p)) : []);
    setItems(hits.slice(0, 30).map((x) => ({ ...x, prefix: c.prefix })));
    setSel(0);
  };
  const accept = (it) => {
    const el = ta.current, pos = el.selectionStart;
    const start = pos - it.prefix.length;
    const ins = it.text + (it.kind === "function" ? "(" : "");
    const next = el.value.slice(0, start) + ins + el.value.slice(pos);
    onInput(next);
    setItems([]);
    requestAnimationFrame(() => { el.focus(); el.selectionStart = el.selectionEnd = start + ins.length; });
  };
  const onKey = (e) => {
    if (e.key === " " && e.ctrlKey) { e.preventDefault(); suggest(true); return; }
    if (items.length) {
      if (e.key === "ArrowDown") { e.preventDefault(); setSel((sel + 1) % items.length); return; }
      if (e.key === "ArrowUp") { e.preventDefault(); setSel((sel - 1 + items.length) % items.length); return; }
      if (e.key === "Tab" || e.key === "Enter") { e.preventDefault(); accept(items[sel]); return; }
      if (e.key === "Escape") { setItems([]); return; }
    }
    if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); onRun(ta.current.value); }
  };
  return html`<div class="completer">
    <textarea ref=${ta} rows="2" spellcheck=${false} data-testid="expr" placeholder="PromQL, e.g. rate(vllm:request_success_total[5m])" value=${value}
      onInput=${(e) => { onInput(e.target.value); suggest(false); }} onKeyDown=${onKey} onBlur=${() => setTimeout(() => setItems([]), 150)}></textarea>
    <button data-testid="run" onClick=${() => onRun(ta.current.value)}>run</button>
    ${items.length > 0 && html`<ul class="completions" data-testid="completions">${items.map((it, i) => html`<li class=${i === sel ? "on" : ""} data-completion=${it.text}
      onMouseDown=${(e) => { e.preventDefault(); accept(it); }}><span>${it.text}</span><small>${it.kind}</small></li>`)}</ul>`}
  </div>`;
}
