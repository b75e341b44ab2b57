//! The page of `vkecho show`: one self-contained HTML file (inline CSS and script, no network),
//! readable without its script (the pairs and totals are HTML); the script draws the timelines
//! from the view embedded as JSON (`page.js`, hand-written SVG, no library).

use super::RunView;
use crate::timing::human_ns;
use crate::words::human_bytes;
use std::fmt::Write;

const CSS: &str = include_str!("page.css");
const JS: &str = include_str!("page.js");

/// HTML-escape text.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// The page.
pub fn html(v: &RunView) -> String {
    let mut s = String::new();
    let title = format!(
        "vkecho show: {}",
        v.exe.rsplit('/').next().unwrap_or(&v.exe)
    );
    let _ = write!(
        s,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">\
         <title>{}</title><style>{CSS}</style></head><body>\n",
        esc(&title)
    );
    let _ = writeln!(
        s,
        "<header><h1>{}</h1><p class=\"sub\">trace <code>{}</code> · device {} · elided copies per {}</p></header>",
        esc(&title),
        esc(&v.source),
        esc(&v.device_name),
        esc(&v.plan_source)
    );
    for n in &v.notes {
        let _ = writeln!(s, "<p class=\"note\">note: {}</p>", esc(n));
    }
    s.push_str(&totals(v));
    s.push_str(&breakdown(v));
    s.push_str(if v.timed {
        "<section id=\"timelines\"><h2>Timeline</h2>\
         <p class=\"help\">The x axis is <b>time</b> since the trace began (the host's monotonic clock; the ticks say the unit). \
         A submission spans its <b>GPU timestamps</b> where echo could take them (solid outline: measured on the GPU), else from its \
         <code>vkQueueSubmit</code> to the host's first observation of its completion (dashed outline: spanned by the host's observations, \
         an upper bound). A copy with timestamps of its own spans them; the other commands of a submission share the time between \
         (faded: not measured themselves). A host wait spans the call; a host access spans from the access to the next submission \
         (the end of the host's window). Hover over anything for what it is and how its time was found. \
         <button id=\"axis-toggle\" type=\"button\" aria-pressed=\"true\">show in event order</button> draws the same run by the \
         trace's event sequence instead. \
         Zoom: mouse wheel, <kbd>+</kbd>/<kbd>-</kbd>; pan: drag, <kbd>&larr;</kbd>/<kbd>&rarr;</kbd>; \
         <kbd>0</kbd>: whole range. Keys act on the timeline last clicked.</p>\n"
    } else {
        "<section id=\"timelines\"><h2>Timeline</h2>\
         <p class=\"help\">The x axis is the trace's <b>event sequence</b> (each record's <code>seq</code>), not time: \
         this trace holds no times (it was recorded before echo stamped its records). \
         <button id=\"axis-toggle\" type=\"button\" disabled>event order only</button> \
         Each submission is widened to give its commands room (the ticks name the events). A submission spans from its <code>vkQueueSubmit</code> to the host's first \
         observation of its completion (a fence, a wait for idle, a semaphore); its commands share that span in order. \
         A host access spans from the access to the next submission (the end of the host's window). \
         Zoom: mouse wheel, <kbd>+</kbd>/<kbd>-</kbd>; pan: drag, <kbd>&larr;</kbd>/<kbd>&rarr;</kbd>; \
         <kbd>0</kbd>: whole range. Keys act on the timeline last clicked.</p>\n"
    });
    s.push_str(LEGEND);
    s.push_str(
        "<div class=\"panel\" id=\"panel-iter\" tabindex=\"0\"><h3>One steady iteration</h3>\
         <div class=\"ctl\"><button data-act=\"in\">+ zoom in</button><button data-act=\"out\">− zoom out</button>\
         <button data-act=\"left\">← pan</button><button data-act=\"right\">pan →</button><button data-act=\"reset\">reset</button></div>\
         <div class=\"svgbox\"></div></div>\n\
         <div class=\"panel\" id=\"panel-run\" tabindex=\"0\"><h3>The whole run</h3>\
         <div class=\"ctl\"><button data-act=\"in\">+ zoom in</button><button data-act=\"out\">− zoom out</button>\
         <button data-act=\"left\">← pan</button><button data-act=\"right\">pan →</button><button data-act=\"reset\">reset</button></div>\
         <div class=\"svgbox\"></div></div>\n\
         <noscript><p class=\"note\">The timelines need JavaScript; the pairs and totals below do not.</p></noscript>\
         </section>\n",
    );
    s.push_str(&pairs(v));
    let data = serde_json::to_string(v)
        .expect("view serializes")
        .replace("</", "<\\/")
        .replace("<!--", "<\\!--");
    let _ = write!(
        s,
        "<div id=\"echo-status\" hidden data-state=\"pending\"></div>\n\
         <script type=\"application/json\" id=\"echo-data\">{data}</script>\n\
         <script>{JS}</script>\n</body></html>\n"
    );
    s
}

const LEGEND: &str = "<div class=\"legend\" aria-label=\"legend\">\
<span><svg width=\"34\" height=\"14\"><rect x=\"1\" y=\"1\" width=\"32\" height=\"12\" class=\"k-submit\"/></svg> submission (GPU-measured)</span>\
<span class=\"t-host\"><svg width=\"34\" height=\"14\"><rect x=\"1\" y=\"1\" width=\"32\" height=\"12\" class=\"k-submit\"/></svg> submission (host-observed)</span>\
<span><svg width=\"34\" height=\"14\"><rect x=\"1\" y=\"1\" width=\"32\" height=\"12\" class=\"k-copy\"/></svg> copy kept (solid)</span>\
<span><svg width=\"34\" height=\"14\"><rect x=\"1\" y=\"1\" width=\"32\" height=\"12\" class=\"k-elided\" fill=\"url(#hatch-legend)\"/>\
<defs><pattern id=\"hatch-legend\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\">\
<rect width=\"6\" height=\"6\" fill=\"#fff\"/><line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#E69F00\" stroke-width=\"3\"/></pattern></defs></svg> copy <b>elided</b> (hatched, dashed outline)</span>\
<span><svg width=\"34\" height=\"14\"><rect x=\"1\" y=\"1\" width=\"32\" height=\"12\" class=\"k-dispatch\"/></svg> dispatch</span>\
<span><svg width=\"34\" height=\"14\"><rect x=\"1\" y=\"1\" width=\"32\" height=\"12\" class=\"k-draw\"/></svg> draw</span>\
<span><svg width=\"34\" height=\"14\"><rect x=\"1\" y=\"1\" width=\"32\" height=\"12\" class=\"k-use\"/></svg> other command</span>\
<span><svg width=\"34\" height=\"14\"><rect x=\"1\" y=\"1\" width=\"32\" height=\"12\" class=\"k-wait\"/></svg> host waits</span>\
<span><svg width=\"34\" height=\"14\"><rect x=\"1\" y=\"1\" width=\"32\" height=\"12\" class=\"k-write\"/></svg> host writes (W)</span>\
<span><svg width=\"34\" height=\"14\"><rect x=\"1\" y=\"1\" width=\"32\" height=\"12\" class=\"k-read\"/></svg> host reads (R)</span>\
<span><svg width=\"20\" height=\"14\"><path d=\"M10 1 L17 13 L3 13 Z\" class=\"m-fence\"/></svg> fence / idle observed</span>\
<span><svg width=\"20\" height=\"14\"><path d=\"M10 1 L17 7 L10 13 L3 7 Z\" class=\"m-semaphore\"/></svg> semaphore</span>\
<span><svg width=\"20\" height=\"14\"><line x1=\"10\" y1=\"0\" x2=\"10\" y2=\"14\" class=\"m-decided\"/></svg> event that decided a pair</span>\
</div>\n";

/// Where one steady iteration's time went (time axis only): two stacked bars, the GPU's and the
/// host's, and each planned group's copies. Plain HTML and inline SVG: no script needed.
fn breakdown(v: &RunView) -> String {
    let Some(b) = &v.breakdown else {
        return String::new();
    };
    let mut s = String::from(
        "<section id=\"breakdown\"><h2>Where one iteration's time goes</h2><p class=\"help\">",
    );
    let _ = write!(
        s,
        "One steady iteration of the profiled run (events {}–{}) took <b>{}</b>. {}",
        b.from_seq,
        b.to_seq,
        esc(&human_ns(b.iteration)),
        esc(match b.gpu_timing.as_str() {
            "gpu" => "GPU times come from timestamps echo took around each submission and copy (calibrated onto the host's clock).",
            "gpu-aligned" => "GPU times come from timestamps echo took around each submission and copy (their lengths exact, placed by the host's observations).",
            _ => "The device gave no GPU timestamps: the GPU's time is each submission from its submission to its observed completion (an upper bound), and copies are not measured.",
        })
    );
    s.push_str(" Copies the plan elides cost what they cost in this profiled run; enforce removes them.</p>");
    let w = 760.0;
    let bar = |s: &mut String, name: &str, id: &str, parts: &[(&str, &str, f64)]| {
        let _ = write!(
            s,
            "<div class=\"bar\" id=\"{id}\"><span class=\"bar-name\">{}</span><svg width=\"{w}\" height=\"18\" role=\"img\" aria-label=\"{}\">",
            esc(name),
            esc(name)
        );
        let mut x = 0.0;
        for (class, label, ns) in parts {
            let pw = if b.iteration > 0.0 {
                ns / b.iteration * w
            } else {
                0.0
            };
            if pw > 0.0 {
                let _ = write!(
                    s,
                    "<rect x=\"{x:.1}\" y=\"1\" width=\"{pw:.1}\" height=\"16\" class=\"{class}\"{}><title>{}: {} ({:.1} %)</title></rect>",
                    if *class == "k-elided" { " fill=\"url(#hatch-legend)\"" } else { "" },
                    esc(label),
                    esc(&human_ns(*ns)),
                    100.0 * ns / b.iteration
                );
            }
            x += pw;
        }
        s.push_str("</svg><span class=\"bar-parts\">");
        let words: Vec<String> = parts
            .iter()
            .map(|(_, label, ns)| {
                format!(
                    "{label} {} ({:.0} %)",
                    human_ns(*ns),
                    100.0 * ns / b.iteration.max(1.0)
                )
            })
            .collect();
        s.push_str(&esc(&words.join(" · ")));
        s.push_str("</span></div>");
    };
    bar(
        &mut s,
        "GPU",
        "bar-gpu",
        &[
            ("k-copy", "copies kept", b.copies_kept),
            ("k-elided", "copies elided", b.copies_elided),
            ("k-dispatch", "other GPU work", b.other_gpu),
            ("k-idle", "idle", b.gpu_idle),
        ],
    );
    bar(
        &mut s,
        "host",
        "bar-host",
        &[
            ("k-wait", "waiting for the GPU", b.host_waits),
            ("k-idle", "other host work", b.host_other),
        ],
    );
    if !b.groups.is_empty() {
        s.push_str("<ul class=\"groups\">");
        for g in &b.groups {
            let _ = write!(
                s,
                "<li data-group=\"{}\">group {}: {} cop{} ({}) took <b>{}</b>, {:.1} % of the iteration{}</li>",
                g.group,
                g.group,
                g.copies,
                if g.copies == 1 { "y" } else { "ies" },
                esc(&human_bytes(g.bytes)),
                esc(&human_ns(g.ns)),
                100.0 * g.fraction,
                if g.measured < g.copies {
                    format!(" ({} without GPU times)", g.copies - g.measured)
                } else {
                    String::new()
                }
            );
        }
        s.push_str("</ul>");
    }
    s.push_str("</section>\n");
    s
}

fn totals(v: &RunView) -> String {
    let t = &v.totals;
    let mut s = String::from("<section id=\"totals\"><h2>Totals</h2><dl class=\"totals\">");
    let mut item = |k: &str, val: String| {
        let _ = write!(s, "<div><dt>{}</dt><dd>{}</dd></div>", esc(k), esc(&val));
    };
    item(
        "copies in the trace",
        format!("{} ({})", t.copies, human_bytes(t.copy_bytes)),
    );
    item(
        "elided per run",
        format!(
            "{} ({} cop{})",
            human_bytes(t.elided_bytes),
            t.elided_copies,
            if t.elided_copies == 1 { "y" } else { "ies" }
        ),
    );
    item(
        &match v.iteration {
            Some((a, b)) => format!("elided in the steady iteration shown (events {a}–{b})"),
            None => "elided per steady iteration".into(),
        },
        if v.iteration.is_some() {
            format!(
                "{} ({} cop{})",
                human_bytes(t.elided_bytes_per_iter),
                t.elided_copies_per_iter,
                if t.elided_copies_per_iter == 1 {
                    "y"
                } else {
                    "ies"
                }
            )
        } else {
            "— (the run does not repeat)".into()
        },
    );
    item(
        "the plan's groups",
        format!(
            "{} group{}, saving {} per iteration",
            t.groups,
            if t.groups == 1 { "" } else { "s" },
            human_bytes(t.plan_bytes_per_iter)
        ),
    );
    match &t.stats {
        Some(st) => {
            item(
                "memory not allocated (enforce run)",
                human_bytes(st.memory_not_allocated),
            );
            item(
                "elided by the enforce run",
                format!(
                    "{} ({} regions, counted per submission); plan {}",
                    human_bytes(st.bytes_elided_run),
                    st.regions_elided_run,
                    if st.plan_status.is_empty() {
                        "?"
                    } else {
                        &st.plan_status
                    }
                ),
            );
        }
        None => item(
            "memory not allocated",
            "— (give the enforce run's statistics: --stats FILE)".into(),
        ),
    }
    if t.recovered.is_empty() {
        item(
            "recovered fraction",
            "— (give a benchmark result: --bench FILE)".into(),
        );
    }
    for (what, r) in &t.recovered {
        item(
            &format!(
                "recovered fraction{}",
                if what.is_empty() {
                    String::new()
                } else {
                    format!(" ({what})")
                }
            ),
            if r.is_finite() {
                format!("{:.1} %", r * 100.0)
            } else {
                "— (not defined: the twin gained nothing)".into()
            },
        );
    }
    s.push_str("</dl></section>\n");
    s
}

fn pairs(v: &RunView) -> String {
    let mut s = String::from("<section id=\"pairs\"><h2>Candidate pairs</h2>");
    if v.pairs.is_empty() {
        s.push_str("<p>No candidate pairs: no executed copy has one side the host touches and one it leaves alone (see <code>vkecho analyze</code>).</p></section>\n");
        return s;
    }
    s.push_str(
        "<p class=\"help\">As <code>vkecho analyze</code> prints them. <i>Decided at</i> links to the event on the timeline.</p>\
         <table id=\"pairs-table\"><thead><tr><th>#</th><th>staging</th><th>device</th><th>role</th><th>copies/it</th>\
         <th>bytes/it</th><th>decision</th><th>decided at</th><th>why, in plain words</th><th>created at</th></tr></thead><tbody>\n",
    );
    for p in &v.pairs {
        let event = match p.event {
            Some(e) => format!("<a class=\"ev\" href=\"#ev-{e}\" data-seq=\"{e}\">event {e}</a>"),
            None => "—".into(),
        };
        let why = if p.why.is_empty() {
            esc(&p.headline)
        } else {
            format!(
                "{}<details><summary>as <code>vkecho analyze</code> prints it</summary><pre>{}</pre></details>",
                esc(&p.headline),
                esc(&p.why)
            )
        };
        let _ = writeln!(
            s,
            "<tr class=\"pair {}\" id=\"pair-{}\" data-pair=\"{}\" data-verdict=\"{}\" data-condition=\"{}\">\
             <td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"verdict\">{}</td><td>{}</td><td>{}</td>\
             <td class=\"site\">staging: {}<br>device: {}</td></tr>",
            if p.accepted { "accepted" } else { "rejected" },
            p.number,
            p.number,
            if p.accepted { "accepted" } else { "rejected" },
            esc(&p.condition),
            p.number,
            esc(&p.staging),
            esc(&p.device),
            esc(&p.role),
            esc(&p.copies_per_iter),
            esc(&p.bytes_per_iter),
            esc(&p.decision),
            event,
            why,
            esc(&p.staging_site),
            esc(&p.device_site)
        );
    }
    s.push_str("</tbody></table></section>\n");
    s
}
