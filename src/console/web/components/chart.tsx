// Stacked bars per UTC day (spend or tokens by model), drawn by uPlot on a canvas. uPlot has no
// stacking of its own: each model's bar is drawn from 0 to the running sum of the models below
// it, the tallest first, so each visible band is one model. Bar heights are floats (a canvas
// needs them); every figure written as text (the legend, the axis aside) comes from the exact
// bigint values.
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';

export interface StackSeries {
  label: string;
  /** One value per day, exact. */
  values: bigint[];
}

/** Chart colours: colour i is also the CSS class .swatch-<i> where a legend needs one. */
export const PALETTE = [
  '#3566d6',
  '#e07b39',
  '#2f9e77',
  '#c4504b',
  '#8360c3',
  '#c89a2c',
  '#2a96b0',
  '#cf5f9b',
  '#66758a',
  '#8aa63a',
];

const DAY_SECONDS = 86_400;

export function StackedBars(props: {
  /** "YYYY-MM-DD", one per bar, oldest first. */
  days: string[];
  series: StackSeries[];
  /** Exact text of a value (the legend). */
  format: (v: bigint) => string;
  /** A value as a float for bar heights (e.g. nano-USD -> USD). */
  toFloat: (v: bigint) => number;
  /** An axis tick's text. */
  tick: (v: number) => string;
  label: string;
}) {
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const n = props.series.length;
    const xs = props.days.map((d) => Date.parse(`${d}T00:00:00Z`) / 1000);
    // Running sums, bottom (first series) up.
    const sums: bigint[][] = [];
    props.series.forEach((s, i) => {
      sums.push(s.values.map((v, d) => v + (i > 0 ? sums[i - 1]![d]! : 0n)));
    });
    // uPlot draws in order: the top of the stack (largest sums) first.
    const order = props.series.map((_, i) => n - 1 - i);
    const totals = props.series.map((s) => s.values.reduce((a, b) => a + b, 0n));
    const bars = uPlot.paths.bars!({ size: [0.72, 56], gap: 1 });
    const opts: uPlot.Options = {
      width: Math.max(el.clientWidth, 280),
      height: el.clientWidth < 500 ? 220 : 280,
      tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), 'Etc/UTC'),
      cursor: { drag: { x: false, y: false }, points: { show: false } },
      select: { show: false, left: 0, top: 0, width: 0, height: 0 },
      legend: { live: true },
      scales: {
        x: { time: true, range: (_u, min, max) => [min - DAY_SECONDS * 0.6, max + DAY_SECONDS * 0.6] },
        y: { range: (_u, _min, max) => [0, max > 0 ? max * 1.08 : 1] },
      },
      axes: [
        { stroke: '#5b6475', grid: { show: false }, ticks: { stroke: '#d9dee6' } },
        {
          stroke: '#5b6475',
          grid: { stroke: '#eceff4', width: 1 },
          ticks: { show: false },
          size: 64,
          values: (_u, splits) => splits.map((v) => props.tick(v)),
        },
      ],
      series: [
        {
          label: 'Day',
          value: (_u, _v, _s, idx) =>
            idx === null || idx === undefined ? `${props.days.length} days, totals` : props.days[idx]!,
        },
        ...order.map((i) => ({
          label: props.series[i]!.label,
          stroke: PALETTE[i % PALETTE.length]!,
          fill: PALETTE[i % PALETTE.length]!,
          width: 0,
          paths: bars,
          points: { show: false },
          value: (_u: uPlot, _v: number | null, _s: number, idx: number | null) =>
            props.format(idx === null || idx === undefined ? totals[i]! : props.series[i]!.values[idx]!),
        })),
      ],
    };
    const data: uPlot.AlignedData = [xs, ...order.map((i) => sums[i]!.map((v) => props.toFloat(v)))];
    const plot = new uPlot(opts, data, el);
    const resize = new ResizeObserver(() => {
      const w = Math.max(el.clientWidth, 280);
      if (w !== plot.width) plot.setSize({ width: w, height: w < 500 ? 220 : 280 });
    });
    resize.observe(el);
    return () => {
      resize.disconnect();
      plot.destroy();
    };
  }, [props.days, props.series]);
  return <div class="chart" ref={box} role="img" aria-label={props.label} />;
}

/** 1234567 -> "1.2M", 5300 -> "5.3k": axis ticks only. */
export function compact(v: number): string {
  const abs = Math.abs(v);
  if (abs >= 1e9) return `${trim(v / 1e9)}B`;
  if (abs >= 1e6) return `${trim(v / 1e6)}M`;
  if (abs >= 1e3) return `${trim(v / 1e3)}k`;
  return trim(v);
}

/** An axis tick in USD: "$0.0004", "$1.5", "$1.2k". */
export function usdTick(v: number): string {
  if (v === 0) return '$0';
  if (Math.abs(v) >= 1000) return `$${compact(v)}`;
  return `$${Number(v.toPrecision(3))}`;
}

const trim = (v: number) => String(Number(v.toFixed(1)));
