//! The report as people read it: the Markdown table on stdout and the `--plot` chart.

use std::path::Path;

use super::{API_SERVER, EMULATOR, Error, Figures, HARNESS, OPERATOR, Report, TRANSLATOR};

/// One row of the table: what it shows, and how for one side.
type Row<'a> = (String, Box<dyn Fn(&Figures) -> String + 'a>);

/// The Markdown table printed on stdout: a column for each side run.
pub fn markdown(report: &Report, time_scale: f64) -> String {
    let sides = report.sides();
    // A run that did not converge: its times are lower bounds, its steady state unmeasured.
    let at_least = |f: &Figures, t: f64| {
        if f.clusters_ready < f.clusters {
            format!("≥ {t}")
        } else {
            t.to_string()
        }
    };
    fn row<'a>(what: &str, show: impl Fn(&Figures) -> String + 'a) -> Row<'a> {
        (what.to_owned(), Box::new(show))
    }
    let mut rows: Vec<Row<'_>> = vec![
        row("clusters Ready", |f| {
            format!("{} of {}", f.clusters_ready, f.clusters)
        }),
        row("time to Ready p50 (s)", move |f| {
            at_least(f, f.time_to_ready_p50_s)
        }),
        row("time to Ready p95 (s)", move |f| {
            at_least(f, f.time_to_ready_p95_s)
        }),
        row("time to all Ready (s)", move |f| {
            at_least(f, f.time_to_all_ready_s)
        }),
        row("runs: time to all Ready (s)", |f| {
            let all: Vec<String> = f
                .time_to_all_ready_runs_s
                .iter()
                .map(f64::to_string)
                .collect();
            format!(
                "median {} of {} (spread {}): {}",
                f.time_to_all_ready_s,
                f.runs,
                f.time_to_all_ready_spread_s,
                all.join(", ")
            )
        }),
        row(
            "lower bound (s): max(chain, ARM buckets, chain after the writes)",
            |f| {
                format!(
                    "{} = max({}, {}, {})",
                    f.lower_bound_s,
                    f.lower_bound_chain_s,
                    f.lower_bound_throttle_s,
                    f.lower_bound_staged_s
                )
            },
        ),
        row("ratio to lower bound (all Ready)", move |f| {
            match (&f.ratio_to_lower_bound, &f.ratio_refused) {
                (Some(r), _) => at_least(f, *r),
                (None, Some(why)) => format!("not shown: {why}"),
                (None, None) => "-".to_owned(),
            }
        }),
        row("harness lag p99 (s; share of chain)", |f| {
            format!(
                "{} ({:.1} %)",
                f.harness_lag_p99_s,
                f.harness_lag_fraction * 100.0
            )
        }),
        row("harness lag p99 by process (s)", |f| {
            listed(&f.harness_lag_p99_by_process_s)
        }),
        row("ARM requests to Ready", |f| listed(&f.arm_requests)),
        row("ARM reads per resource (GETs by target)", |f| {
            format!(
                "{} ({})",
                f.reads_per_resource,
                listed(&f.arm_reads_by_target)
            )
        }),
        row("PUTs per resource", |f| f.puts_per_resource.to_string()),
        row("steady-state writes (simulated s measured)", |f| {
            f.steady_state_writes.map_or_else(
                || "not measured".to_owned(),
                |n| format!("{n} in {} s", f.steady_state_s),
            )
        }),
        row("throttled responses (429)", |f| {
            f.throttled_responses.to_string()
        }),
        row("wake-up gap p95 (s; by kind)", |f| {
            format!(
                "{} ({})",
                f.wakeup_gap_p95_s,
                listed(&f.wakeup_gap_p95_by_kind_s)
            )
        }),
        row(
            "cloud CR stages p50 / p95 (s): waiting for dependencies, to first PUT, provisioning",
            |f| {
                let st = &f.stages_s;
                format!(
                    "{} / {}, {} / {}, {} / {}",
                    st.waiting.p50,
                    st.waiting.p95,
                    st.to_put.p50,
                    st.to_put.p95,
                    st.provisioning.p50,
                    st.provisioning.p95
                )
            },
        ),
        row("machine CPU busy while converging (all cores)", |f| {
            format!("{:.1} %", f.machine_busy_share * 100.0)
        }),
        row("cloud CRs", |f| f.cloud_crs.to_string()),
    ];
    // Every process any side measured, in the order of the chain of work.
    for name in [OPERATOR, TRANSLATOR, API_SERVER, EMULATOR, HARNESS] {
        if !sides.iter().any(|(_, f)| f.components.contains_key(name)) {
            continue;
        }
        let show = move |f: &Figures, each: fn(&super::Component) -> String| {
            f.components.get(name).map_or_else(|| "-".to_owned(), each)
        };
        rows.push(row(
            &format!("{name} CPU (real s) / peak RSS (MiB)"),
            move |f| show(f, |c| format!("{} / {}", c.cpu_s, c.peak_rss_mb)),
        ));
        rows.push(row(
            &format!("{name} per cloud CR (real ms / KiB)"),
            move |f| show(f, |c| format!("{} / {}", c.cpu_ms_per_cr, c.rss_kib_per_cr)),
        ));
    }
    let (clusters, machines) = sides
        .first()
        .map_or((0, 0), |(_, f)| (f.clusters, f.machines));
    let titles: Vec<&str> = sides.iter().map(|(title, _)| *title).collect();
    let mut out = format!(
        "{} clusters × {} machines, time scale {time_scale} (times in simulated seconds)\n\n| | {} |\n|{}\n",
        clusters,
        machines,
        titles.join(" | "),
        " --- |".repeat(titles.len() + 1)
    );
    for (what, show) in rows {
        let cells: Vec<String> = sides.iter().map(|(_, f)| show(f)).collect();
        out.push_str(&format!("| {what} | {} |\n", cells.join(" | ")));
    }
    for (title, f) in &sides {
        out.push_str(&progress_table(title, f));
    }
    out
}

/// How many cloud CRs had been created, could be acted on, had been PUT and were Ready as the
/// run went on: where the count that lags behind the one before it is the stage that holds the
/// run back.
fn progress_table(title: &str, f: &Figures) -> String {
    let mut out = format!(
        "\n{title}: cloud CRs by stage (of {}) as the run went on\n\n| simulated s | created | dependencies Ready | PUT | Ready |\n| --- | --- | --- | --- | --- |\n",
        f.cloud_crs
    );
    for p in &f.progress {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} |\n",
            p.at_s, p.created, p.actionable, p.put, p.ready
        ));
    }
    out
}

/// `key value, key value, …`.
fn listed<V: std::fmt::Display>(map: &std::collections::BTreeMap<String, V>) -> String {
    let each: Vec<String> = map.iter().map(|(k, v)| format!("{k} {v}")).collect();
    each.join(", ")
}

/// Writes the chart, as SVG: for each side run, every cluster's time to Ready (left axis) at the
/// moment it was Ready, the lower bound, and the harness lag through the run (right axis), so a
/// slow stretch can be told apart from a harness that fell behind.
pub fn plot(report: &Report, path: &Path) -> Result<(), Error> {
    use plotters::prelude::*;
    let draw =
        |e: &dyn std::fmt::Display| Error::Invalid(format!("drawing {}: {e}", path.display()));
    let strata = report.strata.as_ref().map(|f| ("Strata", f, BLUE));
    let baseline = report.baseline.as_ref().map(|f| ("ASO v2 model", f, RED));
    let series: Vec<_> = strata.into_iter().chain(baseline).collect();
    let Some(&(_, first, _)) = series.first() else {
        return Err(Error::Invalid("no run to plot".into()));
    };
    let (clusters, machines, bound) = (first.clusters, first.machines, first.lower_bound_s);
    // (when Ready, time to Ready) of every cluster Ready, per side.
    let points = |f: &Figures| -> Vec<(f64, f64)> {
        let mut p: Vec<(f64, f64)> = f
            .ready_after_start_s
            .iter()
            .zip(&f.time_to_ready_s)
            .filter_map(|(at, t)| at.map(|at| (at, *t)))
            .collect();
        p.sort_by(|a, b| a.0.total_cmp(&b.0));
        p
    };
    let max = |values: &mut dyn Iterator<Item = f64>, floor: f64| values.fold(floor, f64::max);
    let right = max(
        &mut series
            .iter()
            .flat_map(|s| points(s.1).into_iter().map(|p| p.0))
            .chain(
                series
                    .iter()
                    .flat_map(|s| s.1.harness_lag_over_time_s.iter().map(|p| p.0)),
            ),
        1.0,
    ) * 1.05;
    let top = max(
        &mut series
            .iter()
            .flat_map(|s| s.1.time_to_ready_s.iter().copied())
            .chain([bound]),
        1.0,
    ) * 1.1;
    let lag_top = max(
        &mut series
            .iter()
            .flat_map(|s| s.1.harness_lag_over_time_s.iter().map(|p| p.1)),
        0.1,
    ) * 1.2;
    let root = SVGBackend::new(path, (900, 500)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| draw(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "Time to Ready per cluster and harness lag ({} × {} machines, simulated s)",
                clusters, machines
            ),
            ("sans-serif", 20),
        )
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .right_y_label_area_size(60)
        .build_cartesian_2d(0f64..right, 0f64..top)
        .map_err(|e| draw(&e))?
        .set_secondary_coord(0f64..right, 0f64..lag_top);
    chart
        .configure_mesh()
        .x_desc("simulated seconds since the first apply (when the cluster was Ready)")
        .y_desc("time to Ready (s)")
        .draw()
        .map_err(|e| draw(&e))?;
    chart
        .configure_secondary_axes()
        .y_desc("harness lag p99 (s)")
        .draw()
        .map_err(|e| draw(&e))?;
    for (name, figures, color) in series {
        let ready = points(figures);
        chart
            .draw_series(ready.iter().map(|p| Circle::new(*p, 3, color.filled())))
            .map_err(|e| draw(&e))?
            .label(format!("{name}: time to Ready"))
            .legend(move |(x, y)| Circle::new((x + 10, y), 3, color.filled()));
        let lag = color.mix(0.5).stroke_width(1);
        chart
            .draw_secondary_series(LineSeries::new(
                figures.harness_lag_over_time_s.iter().copied(),
                lag,
            ))
            .map_err(|e| draw(&e))?
            .label(format!("{name} run: harness lag p99 (right axis)"))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], lag));
    }
    chart
        .draw_series(LineSeries::new(
            [(0.0, bound), (right, bound)],
            BLACK.stroke_width(1),
        ))
        .map_err(|e| draw(&e))?
        .label("lower bound")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK.stroke_width(1)));
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| draw(&e))?;
    root.present().map_err(|e| draw(&e))?;
    Ok(())
}
