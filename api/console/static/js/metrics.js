// The overview's live charts, from the nodes' /metrics (Prometheus text): counters become rates and
// histograms percentiles over each refresh's interval, drawn with uPlot (from npm, served by the node).
// A Series sums the nodes it is given (every node for the cluster's totals, or one): each node's rates and
// latency buckets over the interval, counted only for a node read at both ends (a node that restarted or
// did not answer adds nothing, instead of a jump).

const NS = "raftlog_";
const WINDOW = 150; // points kept: five minutes at one sample every two seconds

// One sample line of the Prometheus text format (version 0.0.4): a name, its labels, a value and an optional
// timestamp. Label values are quoted strings that may hold any character, "}" and "," included (a route such
// as /topics/{topic}), with \\, \" and \n escaped; null when the line is not a sample.
export function parseSample(line) {
  const name = /^[a-zA-Z_:][a-zA-Z0-9_:]*/.exec(line);
  if (!name) return null;
  const labels = {};
  let at = name[0].length;
  if (line[at] === "{") {
    at += 1;
    const pair = /\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(,?)\s*/y;
    for (;;) {
      if (line[at] === "}") { at += 1; break; }
      pair.lastIndex = at;
      const match = pair.exec(line);
      if (!match) return null;
      labels[match[1]] = match[2].replace(/\\(.)/g, (_, c) => (c === "n" ? "\n" : c));
      at = pair.lastIndex;
      if (!match[3] && line[at] !== "}") return null;
    }
  }
  const rest = /^\s+(\S+)(?:\s+-?\d+)?\s*$/.exec(line.slice(at));
  if (!rest) return null;
  const value = rest[1] === "+Inf" ? Infinity : rest[1] === "-Inf" ? -Infinity : Number(rest[1]);
  return { name: name[0], labels, value };
}

export function parse(text) {
  const samples = new Map();
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const sample = parseSample(line);
    if (!sample) continue;
    const list = samples.get(sample.name) || [];
    list.push({ labels: sample.labels, value: sample.value });
    samples.set(sample.name, list);
  }
  return samples;
}

function total(samples, name, keep = () => true) {
  return (samples.get(NS + name) || []).filter((s) => keep(s.labels)).reduce((sum, s) => sum + s.value, 0);
}

function buckets(samples, name, keep = () => true) {
  const byBound = new Map();
  for (const s of samples.get(NS + name + "_bucket") || []) {
    if (!keep(s.labels)) continue;
    const bound = s.labels.le === "+Inf" ? Infinity : Number(s.labels.le);
    byBound.set(bound, (byBound.get(bound) || 0) + s.value);
  }
  return [...byBound.entries()].sort((a, b) => a[0] - b[0]);
}

// The q-quantile (seconds) of what was observed between two scrapes; null when nothing was
export function quantile(before, after, q) {
  const start = new Map(before);
  const deltas = after.map(([bound, count]) => [bound, count - (start.get(bound) || 0)]);
  const count = deltas.length ? deltas[deltas.length - 1][1] : 0;
  if (count <= 0) return null;
  const rank = q * count;
  let lowerBound = 0, lowerCount = 0;
  for (const [bound, cumulative] of deltas) {
    if (cumulative >= rank) {
      if (bound === Infinity) return lowerBound;
      const inBucket = cumulative - lowerCount;
      return lowerBound + (bound - lowerBound) * (inBucket ? (rank - lowerCount) / inBucket : 1);
    }
    lowerBound = bound; lowerCount = cumulative;
  }
  return lowerBound;
}

const produceRoute = (labels) => labels.method === "POST" && labels.route.startsWith("/topics/");

const kafkaProduce = (labels) => labels.api === "Produce";

function reading(samples) {
  return {
    produced: total(samples, "produced_records_total"),
    fetched: total(samples, "fetched_records_total"),
    commit: buckets(samples, "produce_commit_seconds"),
    http: buckets(samples, "http_request_duration_seconds", produceRoute),
    kafka: buckets(samples, "kafka_request_seconds", kafkaProduce),
  };
}

export const CHARTS = [
  { id: "records", title: "Records/s (partitions led)", unit: "records/s", series: ["produced", "fetched"] },
  { id: "commit", title: "Produce commit latency (Raft), ms", unit: "ms", series: ["p50", "p99"] },
  { id: "http", title: "HTTP produce latency, ms", unit: "ms", series: ["p50", "p99"] },
  { id: "kafka", title: "Kafka produce latency, ms", unit: "ms", series: ["p50", "p99"] },
];
const LATENCIES = ["commit", "http", "kafka"];

// Each bucket's count between two readings of one node (cumulative bounds kept)
function bucketDeltas(before, after) {
  const start = new Map(before);
  return after.map(([bound, count]) => [bound, count - (start.get(bound) || 0)]);
}

// Several nodes' bucket deltas as one histogram's (summed by bound)
function mergeDeltas(lists) {
  const byBound = new Map();
  for (const list of lists) for (const [bound, count] of list) byBound.set(bound, (byBound.get(bound) || 0) + count);
  return [...byBound.entries()].sort((a, b) => a[0] - b[0]);
}

// Holds the samples of the charts across refreshes (kept while the page is open)
export class Series {
  constructor() {
    this.times = [];
    this.values = Object.fromEntries(CHARTS.map((c) => [c.id, c.series.map(() => [])]));
    this.last = null;
  }

  // texts: one node's /metrics text, or {node id: its text} for several (summed)
  add(texts, nowMs) {
    const byNode = typeof texts === "string" ? { "": texts } : texts;
    const now = Object.fromEntries(Object.entries(byNode).map(([node, text]) => [node, reading(parse(text))]));
    const last = this.last;
    this.last = { readings: now, at: nowMs };
    if (!last) return false;
    const seconds = (nowMs - last.at) / 1000;
    if (seconds <= 0) return false;
    const both = Object.keys(now).filter((node) => last.readings[node]);
    // a counter that went down is a node that restarted: its interval is left out
    const rate = (name) => both.reduce((sum, node) =>
      sum + Math.max(0, now[node][name] - last.readings[node][name]), 0) / seconds;
    const ms = (v) => (v === null ? null : v * 1000);
    const point = { records: [rate("produced"), rate("fetched")] };
    for (const id of LATENCIES) {
      const deltas = mergeDeltas(both.map((node) => bucketDeltas(last.readings[node][id], now[node][id]))
        .filter((list) => list.every(([, count]) => count >= 0)));
      point[id] = [ms(quantile([], deltas, 0.5)), ms(quantile([], deltas, 0.99))];
    }
    this.push(nowMs / 1000, point);
    return true;
  }

  push(time, point) {
    this.times.push(time);
    for (const chart of CHARTS) point[chart.id].forEach((v, i) => this.values[chart.id][i].push(v));
    if (this.times.length > WINDOW) {
      this.times.shift();
      for (const chart of CHARTS) this.values[chart.id].forEach((list) => list.shift());
    }
  }

  data(id) {
    return [this.times, ...this.values[id]];
  }

  // whether the chart has drawn any point in its window (an empty chart while its data exists is a bug)
  shown(id) {
    return this.values[id].some((list) => list.some((v) => v !== null && Number.isFinite(v)));
  }

  latest(id) {
    return this.values[id].map((list) => (list.length ? list[list.length - 1] : null));
  }
}

const COLORS = ["#2563eb", "#dc2626"];

// The time axis: HH:MM:SS, its ticks at least TICK_GAP_PX apart, so that labels never overlap however
// narrow the chart (uPlot's default spaces them 50 px apart and writes "11:42:30 PM", which then do)
export const TICK_GAP_PX = 90;
const clock = new Intl.DateTimeFormat([], { hour: "2-digit", minute: "2-digit", second: "2-digit", hour12: false });
export const timeLabels = (splits) => splits.map((t) => (t === null ? null : clock.format(new Date(t * 1000))));

// The time labels of a drawing, each also kept on the chart's element with where it is drawn ([x px,
// label] in data-ticks), so that a test can see that none overlaps another
function ticked(target, u, splits) {
  const labels = timeLabels(splits);
  target.dataset.ticks = JSON.stringify(splits.map((t, i) => [u.valToPos(t, "x"), labels[i]]).filter(([, l]) => l));
  return labels;
}

export function draw(target, chart, data, width) {
  if (typeof window.uPlot !== "function") return null;
  return new window.uPlot({
    width, height: 180, title: chart.title,
    series: [{}, ...chart.series.map((label, i) => ({ label, stroke: COLORS[i], width: 2, spanGaps: true }))],
    axes: [{ space: TICK_GAP_PX, values: (u, splits) => ticked(target, u, splits) }, { label: chart.unit, size: 60 }],
    scales: {
      x: { time: true, range: (u, min, max) => [Math.min(min ?? max, max - 60), max] }, // a minute at least
      y: { range: (u, min, max) => [0, Math.max(1, max)] },
    },
  }, data, target);
}
