//! The self-contained interactive HTML flame graph.
//!
//! This module owns turning one or more [`Profile`]s into one HTML file: it
//! merges each profile's stacks into a call tree (children merged by frame
//! id, sorted by name), encodes the trees compactly and fills the page
//! template (`flamegraph.html`, whose canvas viewer is plain JavaScript and
//! never touches the network).
//!
//! A page shows one [`View`] at a time: a profile with the counter its
//! widths show (for example CPU samples and allocated bytes of the same run).
//! With several views a tab bar above the graph switches between them; each
//! has its own unit, subtitle, legend, zoom and "no samples" note, and the
//! selected one is kept in the URL hash (`#tab=N`). A single view has no tab
//! bar.
//!
//! Embedded data, read by the template's script:
//! - `fg-config`: JSON with one kind letter per frame (`a` +
//!   [`FrameKind::index`], the synthetic root uses the letter after the last
//!   kind), the colour palette per kind and `views`, the label and value unit
//!   of every view (`unit` at the top level repeats the first view's);
//! - `fg-names`: JSON array of frame names (index = frame index), shared by
//!   all views: a name and kind that occur in several profiles appear once;
//!   the last entry is the root's;
//! - `fg-tree`: one line per view, each a tree in preorder as base64-digit
//!   varints: the node count, then `frame, value, child count` per node.
//!   Node 0 is the root ("all").
//!
//! When a profile carries safepoints, the page shows them above the graph,
//! once for all views (the first view's that has any): summary figures and
//! a table of the slowest ([`SAFEPOINT_ROWS`]) by time to safepoint, which a
//! click on a heading sorts.
//!
//! When a view carries a leak report ([`View::with_leak`], the live
//! objects of a recording with `live`), its tab shows the report's top
//! sites ([`LEAK_ROWS`]) above the graph, in the report's order (leak
//! score, then live bytes), with the line that the graph's widths are live
//! bytes, not growth, and what the report left out; a click on a row
//! searches the graph for its allocating frame. Every other tab of that
//! page names the report's top suspect in one line that opens the tab.
//!
//! All JSON is escaped so that no `<` can appear inside a `<script>` element.

use std::collections::HashMap;
use std::io::{self, BufWriter, Write};

use crate::leak::{self, LeakReport};
use crate::model::{Counter, FrameKind, Profile};
use crate::safepoint::{self, SafepointStats};

const TEMPLATE: &str = include_str!("flamegraph.html");

/// Name of the synthetic root frame that spans all samples.
const ROOT_NAME: &str = "all";

/// Digits of the tree encoding: each holds 5 value bits and a continuation bit (32).
const DIGITS: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// How many of the slowest safepoints the page's table lists.
pub const SAFEPOINT_ROWS: usize = 50;

/// How many of a leak report's sites the page's table lists.
pub const LEAK_ROWS: usize = 10;

/// Separates the encoded trees of successive views in `fg-tree`.
const TREE_SEPARATOR: u8 = b'\n';

/// Options of the HTML flame graph.
#[derive(Clone, Debug, Default)]
pub struct HtmlOptions {
    /// Page title; when empty, the profiles' `meta.title` if they agree,
    /// then "Flame graph".
    pub title: String,
    /// Which counter the frames' widths show, for [`write_html`]; each
    /// [`View`] of [`write_html_multi`] names its own.
    pub counter: Counter,
    /// One line of metadata under the title, shown for every view; when
    /// empty each view's is derived from its profile's metadata (event,
    /// engine, interval, samples, failed walks).
    pub subtitle: String,
}

/// One profile of a page, as a tab: the profile and the counter its frames'
/// widths show.
#[derive(Clone, Debug)]
pub struct View<'a> {
    /// The tab's label, e.g. "CPU (samples)"; when blank, [`default_label`].
    pub label: String,
    pub profile: &'a Profile,
    pub counter: Counter,
    /// The leak report of a live-objects view, whose top sites the tab
    /// lists above the graph.
    pub leak: Option<&'a LeakReport>,
}

impl<'a> View<'a> {
    /// A view labelled by [`default_label`], weighed as [`shown_counter`] says.
    pub fn new(profile: &'a Profile, counter: Counter) -> View<'a> {
        let counter = shown_counter(profile, counter);
        View { label: default_label(profile, counter), profile, counter, leak: None }
    }

    /// A view with a label of its own, weighed as [`shown_counter`] says.
    pub fn labelled(label: String, profile: &'a Profile, counter: Counter) -> View<'a> {
        View { label, profile, counter: shown_counter(profile, counter), leak: None }
    }

    /// The view with a leak report to list above its graph (none: as before).
    /// A report without sites shows nothing.
    pub fn with_leak(mut self, leak: Option<&'a LeakReport>) -> View<'a> {
        self.leak = leak.filter(|r| !r.sites.is_empty());
        self
    }

    fn display_label(&self) -> String {
        if self.label.trim().is_empty() {
            default_label(self.profile, self.counter)
        } else {
            self.label.clone()
        }
    }

    /// The unit of the values shown: "samples", or the profile's total unit.
    fn unit(&self) -> &str {
        match self.counter {
            Counter::Samples => "samples",
            Counter::Total => &self.profile.meta.total_unit,
        }
    }
}

/// The counter a page shows for `profile` when `asked` is asked for: a lock
/// profile is always weighed by the time waited, since its sample counts
/// are no count a reader can use (the agent's count waiting time in units of
/// the lock interval, a JFR recording's count recorded waits, which
/// duration-weighted sampling keeps long waits of more than short ones).
pub fn shown_counter(profile: &Profile, asked: Counter) -> Counter {
    if profile.meta.event == "lock" && !profile.meta.counts_only() {
        Counter::Total
    } else {
        asked
    }
}

/// A label naming what a profile recorded and what the widths show, from its
/// event and the counter: "CPU (samples)", "CPU (time)", "Allocations (bytes)".
pub fn default_label(profile: &Profile, counter: Counter) -> String {
    let meta = &profile.meta;
    let what = match meta.event.as_str() {
        "cpu" | "cpu-clock" | "itimer" | "ctimer" => "CPU".to_string(),
        "alloc" => "Allocations".to_string(),
        "wall" => "Wall clock".to_string(),
        "lock" => "Locks".to_string(),
        "live" => "Live objects".to_string(),
        "" if !meta.title.trim().is_empty() => meta.title.trim().to_string(),
        "" => "Profile".to_string(),
        event => event.to_string(),
    };
    let unit = match (counter, meta.total_unit.as_str()) {
        (Counter::Samples, _) => "samples",
        (Counter::Total, "ns") => "time",
        (Counter::Total, "bytes" | "B") => "bytes",
        (Counter::Total, "") => "total",
        (Counter::Total, unit) => unit,
    };
    format!("{what} ({unit})")
}

/// Writes the profile as a self-contained interactive HTML flame graph.
pub fn write_html<W: Write>(profile: &Profile, opts: &HtmlOptions, out: W) -> io::Result<()> {
    write_html_multi(&[View::new(profile, opts.counter)], opts, out)
}

/// Writes several profiles into one self-contained interactive HTML flame
/// graph, one tab per view; the first view is shown first. `opts.counter`
/// is not used (each view has its own); no views make an empty page.
pub fn write_html_multi<W: Write>(views: &[View<'_>], opts: &HtmlOptions, out: W) -> io::Result<()> {
    let nothing;
    let fallback;
    let views = if views.is_empty() {
        nothing = Profile::default();
        fallback = [View::new(&nothing, opts.counter)];
        &fallback[..]
    } else {
        views
    };
    let page = Page::build(views);
    let title = page_title(views, opts);
    render_page(out, &title, &page, views, |key, out| match key {
        "TABS" => write_tabs(out, views),
        _ => write_subtitles(out, views, opts),
    })
}

/// Fills the page template with `title` and `page`'s trees; `head` writes
/// the tab bar (key `TABS`) and the subtitles (key `SUBTITLES`).
fn render_page<W: Write>(out: W, title: &str, page: &Page, views: &[View], mut head: impl FnMut(&str, &mut BufWriter<W>) -> io::Result<()>) -> io::Result<()> {
    let mut out = BufWriter::with_capacity(1 << 16, out);
    render_template(TEMPLATE, &mut out, |key, out| {
        match key {
            "TITLE" => write_escaped_html(out, title),
            "TABS" | "SUBTITLES" => head(key, out),
            "SAFEPOINTS" => write_safepoints(out, views),
            "LEAKS" => write_leaks(out, views),
            "EMPTY" => page.write_empty_notes(out),
            "CONFIG" => out.write_all(page.config_json(views).as_bytes()),
            "NAMES" => page.write_names_json(out),
            "TREE" => page.write_trees(out),
            _ => return Ok(false),
        }
        .map(|()| true)
    })?;
    out.flush()
}

/// Writes a differential flame graph: frames as wide as in `after`, coloured
/// by how their share of the total changed from `before` (red grew, blue
/// shrank; both profiles normalised by their totals). Frames only in
/// `before` have no width; the tooltip shows both values.
pub fn write_html_diff<W: Write>(before: &Profile, after: &Profile, counter: Counter, opts: &HtmlOptions, out: W) -> io::Result<()> {
    let counter = shown_counter(after, counter);
    let merged = merge_for_diff(before, after, counter);
    let view = View { label: default_label(after, counter), profile: &merged, counter, leak: None };
    let views = [view];
    let page = Page::build_with(&views, |v| Tree::build_diff(v.profile));
    let title = if opts.title.trim().is_empty() { "Differential flame graph".to_string() } else { opts.title.clone() };
    // Each side in its own unit: collapsed stacks (counts only) beside a
    // recording's totals are samples, whatever the other side holds.
    let unit_of = |p: &Profile| match counter {
        Counter::Total if !p.meta.counts_only() => p.meta.total_unit.clone(),
        _ => "samples".to_string(),
    };
    let unit = unit_of(after);
    let sub = if opts.subtitle.is_empty() {
        format!(
            "before: {} · after: {} · width: after · red: larger share than before, blue: smaller",
            format_quantity(before.sum(counter), &unit_of(before)),
            format_quantity(after.sum(counter), &unit)
        )
    } else {
        opts.subtitle.clone()
    };
    render_page(out, &title, &page, &views, |key, out| match key {
        "TABS" => Ok(()),
        _ => {
            out.write_all(b"<div class=\"sub\" data-view=\"0\">")?;
            write_escaped_html(out, &sub)?;
            out.write_all(b"</div>")
        }
    })
}

/// One profile holding both: `samples` = the value in `after`, `total` = in
/// `before`. Frames match by name only (a method JIT-compiled in one run and
/// interpreted in the other is the same method); the first kind seen is kept.
pub fn merge_for_diff(before: &Profile, after: &Profile, counter: Counter) -> Profile {
    let mut merged = Profile::new(after.meta.clone());
    let mut by_name: HashMap<String, u32> = HashMap::new();
    for (p, is_after) in [(after, true), (before, false)] {
        let ids: Vec<u32> = p
            .frames()
            .iter()
            .map(|f| *by_name.entry(f.name.clone()).or_insert_with(|| merged.intern(crate::model::Frame::new(f.name.clone(), f.kind))))
            .collect();
        for s in p.samples() {
            let v = Profile::value(s, counter);
            let stack = s.stack.iter().map(|&f| ids[f as usize]).collect();
            if is_after {
                merged.add(stack, v, 0);
            } else {
                merged.add(stack, 0, v);
            }
        }
    }
    merged
}

/// The frames and trees of all views of a page.
#[derive(Debug)]
struct Page<'p> {
    /// The frames of all views, distinct by name and kind; the root follows.
    frames: Vec<(&'p str, FrameKind)>,
    /// One tree per view; node frames index `frames` (the root: `frames.len()`).
    trees: Vec<Tree>,
}

impl<'p> Page<'p> {
    fn build(views: &[View<'p>]) -> Page<'p> {
        Page::build_with(views, |view| Tree::build(view.profile, view.counter))
    }

    fn build_with(views: &[View<'p>], make: impl Fn(&View<'p>) -> Tree) -> Page<'p> {
        let mut frames: Vec<(&'p str, FrameKind)> = Vec::new();
        let mut index: HashMap<(&'p str, FrameKind), u32> = HashMap::new();
        let mut trees = Vec::with_capacity(views.len());
        for view in views {
            let profile: &'p Profile = view.profile;
            let mut tree = make(view);
            for id in &mut tree.frames {
                let frame = profile.frame(*id);
                let key = (frame.name.as_str(), frame.kind);
                *id = *index.entry(key).or_insert_with(|| {
                    frames.push(key);
                    (frames.len() - 1) as u32
                });
            }
            trees.push(tree);
        }
        let root = frames.len() as u32;
        for tree in &mut trees {
            tree.relabel(root);
        }
        Page { frames, trees }
    }

    /// The `fg-config` JSON: per-frame kind letters, the palette and the views.
    fn config_json(&self, views: &[View]) -> String {
        let mut kinds: String = self.frames.iter().map(|&(_, kind)| kind_letter(kind.index())).collect();
        kinds.push(kind_letter(FrameKind::ALL.len()));

        let mut json = String::from("{\"unit\":");
        push_json_string(&mut json, views.first().map_or("samples", |v| v.unit()));
        json.push_str(",\"kinds\":");
        push_json_string(&mut json, &kinds);
        // Kinds whose names are Java methods: a box too narrow for the name
        // shows it without its package first.
        let java: String =
            [FrameKind::Interpreted, FrameKind::Jit, FrameKind::Inlined, FrameKind::Java, FrameKind::Native].iter().map(|k| kind_letter(k.index())).collect();
        json.push_str(",\"javaKinds\":");
        push_json_string(&mut json, &java);
        json.push_str(",\"palette\":[");
        for kind in FrameKind::ALL {
            let (h, s, l) = palette(kind);
            json.push_str(&palette_entry(kind.label(), h, s, l));
            json.push(',');
        }
        json.push_str(&palette_entry("root", 220, 12, 78));
        json.push_str("],\"views\":[");
        for (i, view) in views.iter().enumerate() {
            if i > 0 {
                json.push(',');
            }
            json.push_str("{\"label\":");
            push_json_string(&mut json, &view.display_label());
            json.push_str(",\"unit\":");
            push_json_string(&mut json, view.unit());
            if self.trees.get(i).is_some_and(|t| t.diff) {
                json.push_str(",\"diff\":true");
            }
            json.push('}');
        }
        json.push_str("]}");
        json
    }

    /// Writes the `fg-names` JSON array: one name per frame, then the root's.
    fn write_names_json<W: Write>(&self, out: &mut W) -> io::Result<()> {
        let mut json = String::with_capacity(1 << 16);
        json.push('[');
        for &(name, _) in &self.frames {
            push_json_string(&mut json, name);
            json.push(',');
            if json.len() > 1 << 15 {
                out.write_all(json.as_bytes())?;
                json.clear();
            }
        }
        push_json_string(&mut json, ROOT_NAME);
        json.push(']');
        out.write_all(json.as_bytes())
    }

    /// Writes the encoded trees, one line per view.
    fn write_trees<W: Write>(&self, out: &mut W) -> io::Result<()> {
        for (i, tree) in self.trees.iter().enumerate() {
            if i > 0 {
                out.write_all(&[TREE_SEPARATOR])?;
            }
            tree.write_encoded(out)?;
        }
        Ok(())
    }

    /// "No samples were recorded" for each empty view; only the first view's shows.
    fn write_empty_notes<W: Write>(&self, out: &mut W) -> io::Result<()> {
        for (i, tree) in self.trees.iter().enumerate() {
            if tree.is_empty() {
                let hidden = if i == 0 { "" } else { " hidden" };
                write!(out, "<p class=\"empty\" data-view=\"{i}\"{hidden}>No samples were recorded.</p>")?;
            }
        }
        Ok(())
    }
}

/// The tab bar: one tab per view, none for a single view.
fn write_tabs<W: Write>(out: &mut W, views: &[View]) -> io::Result<()> {
    if views.len() < 2 {
        return Ok(());
    }
    out.write_all(b"<nav class=\"tabs\" id=\"tabs\" role=\"tablist\" aria-label=\"Profiles\">")?;
    for (i, view) in views.iter().enumerate() {
        let (selected, tabindex) = if i == 0 { ("true", 0) } else { ("false", -1) };
        write!(out, "<button type=\"button\" role=\"tab\" data-tab=\"{i}\" aria-selected=\"{selected}\" tabindex=\"{tabindex}\">")?;
        write_escaped_html(out, &view.display_label())?;
        out.write_all(b"</button>")?;
    }
    out.write_all(b"</nav>")
}

/// A metadata item longer than this (a sentence, such as the allocation
/// accuracy verdict) is folded under the line, in a `<details>` block
/// whose summary names it: the header stays a line or two on a small
/// screen.
const LONG_ITEM_CHARS: usize = 90;

/// One metadata line per view; only the first view's shows. Long items
/// ([`LONG_ITEM_CHARS`]) follow in a block that opens on a click.
fn write_subtitles<W: Write>(out: &mut W, views: &[View], opts: &HtmlOptions) -> io::Result<()> {
    for (i, view) in views.iter().enumerate() {
        let hidden = if i == 0 { "" } else { " hidden" };
        write!(out, "<div class=\"sub\" data-view=\"{i}\"{hidden}>")?;
        let (long, short): (Vec<String>, Vec<String>) =
            subtitle_parts(view.profile, view.counter, opts).into_iter().partition(|p| p.chars().count() > LONG_ITEM_CHARS);
        write_escaped_html(out, &short.join(" · "))?;
        if !long.is_empty() {
            let keys: Vec<&str> = long.iter().map(|p| p.split_once(": ").map_or(p.as_str(), |(k, _)| k)).collect();
            out.write_all(b"<details class=\"more\"><summary>")?;
            write_escaped_html(out, &keys.join(" · "))?;
            out.write_all(b"</summary>")?;
            for p in &long {
                out.write_all(b"<div>")?;
                write_escaped_html(out, p)?;
                out.write_all(b"</div>")?;
            }
            out.write_all(b"</details>")?;
        }
        out.write_all(b"</div>")?;
    }
    Ok(())
}

/// The Safepoints block: summary figures and the slowest safepoints of the
/// first view's profile that has any (times from that profile's start);
/// nothing when none has.
fn write_safepoints<W: Write>(out: &mut W, views: &[View]) -> io::Result<()> {
    let Some(profile) = views.iter().map(|v| v.profile).find(|p| !p.safepoints.is_empty()) else { return Ok(()) };
    let list = &profile.safepoints;
    let stats = SafepointStats::of(list);
    let ns = |v: u64| format_quantity(v, "ns");
    let rows = safepoint::slowest(list, SAFEPOINT_ROWS);
    let mut summary = format!(
        "{} · time to safepoint p50 {} · p99 {} · max {} · total {}",
        group_thousands(stats.count as u64),
        ns(stats.ttsp_p50_ns),
        ns(stats.ttsp_p99_ns),
        ns(stats.ttsp_max_ns),
        ns(stats.ttsp_sum_ns)
    );
    if rows.len() < list.len() {
        summary.push_str(&format!(" · the {} slowest below", rows.len()));
    }
    out.write_all(b"<details class=\"safepoints\" open><summary><b>Safepoints</b> ")?;
    write_escaped_html(out, &summary)?;
    out.write_all(b"</summary><div class=\"sp-scroll\"><table id=\"sp-table\"><thead><tr>")?;
    let heads = [
        ("time (s)", "", "When the safepoint was requested, in seconds from the start of the profile"),
        ("time to safepoint", " aria-sort=\"descending\"", "From the request until every thread had stopped"),
        ("total", "", "From the request until the threads were let go"),
        ("operation", " class=\"text\"", "The VM operation that asked for the safepoint"),
        ("samples", "", "CPU samples taken while threads were being stopped"),
    ];
    for (label, attrs, title) in heads {
        write!(out, "<th{attrs} title=\"")?;
        write_escaped_html(out, title)?;
        write!(out, "\">{label}</th>")?;
    }
    out.write_all(b"</tr></thead><tbody>")?;
    for s in rows {
        let at = s.start_ns.saturating_sub(profile.meta.start_ns);
        write!(out, "<tr title=\"safepoint {}\"><td data-v=\"{at}\">{:.3}</td>", s.id, at as f64 / 1e9)?;
        write!(out, "<td data-v=\"{}\">{}</td>", s.ttsp_ns, ns(s.ttsp_ns))?;
        match s.total_ns {
            Some(t) => write!(out, "<td data-v=\"{t}\">{}</td>", ns(t))?,
            None => out.write_all(b"<td data-v=\"-1\">-</td>")?,
        }
        out.write_all(b"<td class=\"text\">")?;
        write_escaped_html(out, s.operation.as_deref().unwrap_or("-"))?;
        write!(out, "</td><td data-v=\"{0}\">{0}</td></tr>", s.samples)?;
    }
    out.write_all(b"</tbody></table></div></details>")
}

/// The leak suspects of every view with a leak report ([`View::leak`]):
/// the facts, the top [`LEAK_ROWS`] sites in the report's order, and how
/// to read them beside the graph; on the page's other views, one line
/// naming the top suspect, which opens the report's tab. Nothing when no
/// view has a report.
fn write_leaks<W: Write>(out: &mut W, views: &[View]) -> io::Result<()> {
    let Some((with, first)) = views.iter().enumerate().find_map(|(i, v)| v.leak.map(|r| (i, r))) else { return Ok(()) };
    for (i, view) in views.iter().enumerate() {
        let hidden = if i == 0 { "" } else { " hidden" };
        match view.leak {
            Some(report) => write_leak_table(out, i, hidden, report, view.counter)?,
            None => {
                write!(out, "<div class=\"leak-hint\" data-view=\"{i}\"{hidden}><b>Leak suspects:</b> ")?;
                let order = ranked(first);
                let top = &first.sites[order[0]];
                if top.leak_score() > 0.0 {
                    out.write_all(b"the live objects' leak report ranks <code>")?;
                    write_escaped_html(out, &format!("{} \u{2190} {}", top.class(), top.allocated_in()))?;
                    write!(
                        out,
                        "</code> first (score {}, live {}, growing {}/s).",
                        leak::fmt_bytes(top.leak_score()),
                        leak::fmt_bytes(top.live_bytes),
                        leak::fmt_signed_bytes(top.trend().slope)
                    )?;
                } else {
                    out.write_all(b"no site's live bytes grew steadily (every leak score is 0).")?;
                }
                write!(out, " <a href=\"#tab={with}\" data-goto-tab=\"{with}\">")?;
                write_escaped_html(out, &format!("Open {}", views[with].display_label()))?;
                out.write_all(b"</a></div>")?;
            }
        }
    }
    Ok(())
}

/// The indices of the report's sites in its order (leak score, then live
/// bytes), whatever order they come in.
fn ranked(report: &LeakReport) -> Vec<usize> {
    let mut order: Vec<usize> = (0..report.sites.len()).collect();
    order.sort_by(|&a, &b| leak::rank_order(&report.sites[a], &report.sites[b]));
    order
}

/// One view's leak block: a heading that says what ranks the rows and
/// what the widths below show (`counter`), the report's facts (what it left out
/// apart), and the table of its top sites.
fn write_leak_table<W: Write>(out: &mut W, view: usize, hidden: &str, report: &LeakReport, counter: Counter) -> io::Result<()> {
    let order = ranked(report);
    let total = report.live_bytes();
    let shown = order.len().min(LEAK_ROWS);
    write!(out, "<details class=\"leaks\" data-view=\"{view}\"{hidden} open><summary><b>Leak suspects:</b> ")?;
    let more = if order.len() > shown { format!("the top {shown} of {} sites", order.len()) } else { format!("{} sites", order.len()) };
    write_escaped_html(
        out,
        &format!("{more}, ranked by leak score = growth \u{d7} steadiness (R\u{b2}) \u{d7} old share; a site that does not grow scores 0 however large."),
    )?;
    out.write_all(b"</summary><div class=\"leak-read\">")?;
    let widths = match counter {
        Counter::Total => "live bytes",
        Counter::Samples => "live samples (`total` or --total: live bytes)",
    };
    let mut read = format!("The flame graph below is as wide as {widths}, not growth");
    // Name the widest site when it is not the top suspect: the box a
    // newcomer reads as the problem.
    let widest = order.iter().enumerate().max_by(|a, b| report.sites[*a.1].live_bytes.total_cmp(&report.sites[*b.1].live_bytes));
    match widest {
        Some((rank, &i)) if rank > 0 && total > 0.0 => {
            let w = &report.sites[i];
            read.push_str(&format!(
                ": its widest site, {} \u{2190} {} ({:.1}% of live bytes), ranks #{} with score {}.",
                w.class(),
                w.allocated_in(),
                100.0 * w.live_bytes / total,
                rank + 1,
                score_text(w.leak_score())
            ));
        }
        _ => read.push('.'),
    }
    read.push_str(" Click a row to find its site in the graph.");
    write_escaped_html(out, &read)?;
    out.write_all(b"</div>")?;
    // The facts, as the text report gives them; a report without them (an
    // older recording's sites alone) has no duration.
    if report.duration_secs > 0.0 || report.gcs > 0 {
        let mut facts = Vec::new();
        report.write_facts(&mut facts)?;
        for line in String::from_utf8_lossy(&facts).lines().filter(|l| !l.trim().is_empty()) {
            let left_out = line.starts_with("left out:");
            write!(out, "<div class=\"{}\">", if left_out { "leak-note left-out" } else { "leak-note" })?;
            write_escaped_html(out, line)?;
            if left_out {
                out.write_all(b"; they are in neither the table nor the flame graph")?;
            }
            out.write_all(b"</div>")?;
        }
    } else if report.unjudged_tracked > 0 {
        out.write_all(b"<div class=\"leak-note left-out\">")?;
        write_escaped_html(
            out,
            &format!(
                "left out: {} in {} tracked samples allocated since the last GC, which has not judged them yet; they are in neither the table nor the flame graph",
                leak::fmt_bytes(report.unjudged_bytes),
                report.unjudged_tracked
            ),
        )?;
        out.write_all(b"</div>")?;
    }
    out.write_all(b"<div class=\"leak-scroll\"><table class=\"leak-table\"><thead><tr>")?;
    let heads = [
        ("#", "", "Rank in the leak report"),
        ("score", "", "Leak score: bytes the site grew by over the later half of the run x R\u{b2} x old share; 0 when not growing"),
        ("live", "", "Estimated live bytes of the site (what the flame graph's widths show)"),
        ("share", "", "Share of all live bytes"),
        ("growth/s", "", "Recent growth of the site's live bytes per second (least-squares slope after each GC)"),
        ("R\u{b2}", "", "How steadily it grew: 1 = on a straight line"),
        ("old", "", "Share of its live objects that survived at least 2 GCs"),
        ("age", "", "Mean age of its live objects"),
        ("class \u{2190} allocated in", " class=\"text\"", "The allocated class and the frame that allocated it; click a row to find it in the flame graph"),
    ];
    for (label, attrs, title) in heads {
        write!(out, "<th{attrs} title=\"")?;
        write_escaped_html(out, title)?;
        out.write_all(b"\">")?;
        write_escaped_html(out, label)?;
        out.write_all(b"</th>")?;
    }
    out.write_all(b"</tr></thead><tbody>")?;
    for (rank, &i) in order.iter().take(shown).enumerate() {
        let s = &report.sites[i];
        let t = s.trend();
        let score = s.leak_score();
        let share = if total > 0.0 { 100.0 * s.live_bytes / total } else { 0.0 };
        let (class, site) = (s.class(), s.allocated_in());
        let search = if s.frames.len() > 1 { site } else { class };
        write!(out, "<tr tabindex=\"0\" data-rank=\"{}\" data-score=\"{score:.0}\" data-live=\"{:.0}\" data-class=\"", rank + 1, s.live_bytes)?;
        write_escaped_html(out, class)?;
        out.write_all(b"\" data-site=\"")?;
        write_escaped_html(out, site)?;
        out.write_all(b"\" data-search=\"")?;
        write_escaped_html(out, search)?;
        out.write_all(b"\" title=\"")?;
        let mut tip = format!("Click to find {search} in the flame graph");
        if let Some(path) = s.path_to_root.as_ref().filter(|p| !p.is_empty()) {
            tip.push_str("\npath from a GC root to one instance:");
            for step in path {
                tip.push_str("\n  ");
                tip.push_str(step);
            }
        }
        write_escaped_html(out, &tip)?;
        let zero = if score >= 0.5 { "" } else { " class=\"zero\"" };
        write!(
            out,
            "\"><td>{}</td><td{zero}>{}</td><td>{}</td><td>{share:.1}%</td><td>{}/s</td><td>{:.2}</td><td>{:.0}%</td><td>{:.1} s</td><td class=\"text site\"><span class=\"cls\">",
            rank + 1,
            score_text(score),
            leak::fmt_bytes(s.live_bytes),
            growth_text(t.slope),
            t.r2,
            100.0 * s.old_share,
            s.mean_age_secs
        )?;
        write_escaped_html(out, class)?;
        out.write_all(" \u{2190} </span>".as_bytes())?;
        write_escaped_html(out, site)?;
        out.write_all(b"</td></tr>")?;
    }
    out.write_all(b"</tbody></table></div>")?;
    if order.len() > shown {
        let rest: f64 = order[shown..].iter().map(|&i| report.sites[i].live_bytes).sum();
        out.write_all(b"<div class=\"leak-note\">")?;
        write_escaped_html(out, &format!("\u{2026} {} more sites holding {}", order.len() - shown, leak::fmt_bytes(rest)))?;
        out.write_all(b"</div>")?;
    }
    out.write_all(b"</details>")
}

/// A leak score as the table shows it: bytes, and `<1 B` for a score that
/// is not 0 but rounds to it (it still ranks above the zeros).
fn score_text(score: f64) -> String {
    if score > 0.0 && score < 0.5 {
        "<1 B".into()
    } else {
        leak::fmt_bytes(score)
    }
}

/// A growth rate without the sign of a slope that rounds to 0 bytes.
fn growth_text(slope: f64) -> String {
    if slope.abs() < 0.5 {
        "0 B".into()
    } else {
        leak::fmt_signed_bytes(slope)
    }
}

/// One node of the merged call tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Node {
    /// Index into [`Tree::frames`]; the root uses `frames.len()`.
    frame: u32,
    /// Sum of the values of all stacks passing through this node.
    value: u64,
    /// Number of direct children (they follow in preorder).
    children: u32,
    /// Diff pages: the baseline's value for this node.
    before: u64,
}

/// The call tree of a profile, in preorder, root first.
#[derive(Debug)]
struct Tree {
    /// Profile frame ids used by the tree, by tree frame index (page frame
    /// ids once [`Page::build`] has mapped them).
    frames: Vec<u32>,
    nodes: Vec<Node>,
    /// Each node also carries a baseline value (a diff page).
    diff: bool,
}

impl Tree {
    /// Merges the profile's stacks (skipping zero values) into a tree whose
    /// children are sorted by frame name, then kind.
    fn build(profile: &Profile, counter: Counter) -> Tree {
        let stacks = sorted_stacks(profile, counter).into_iter().map(|(s, v)| (s, v, 0)).collect();
        Tree::build_pairs(profile, stacks)
    }

    /// A diff tree from a merged profile whose `samples` counter holds the
    /// new values and `total` the baseline's.
    fn build_diff(merged: &Profile) -> Tree {
        let rank = frame_ranks(merged);
        let mut stacks: Vec<(&[u32], u64, u64)> =
            merged.samples().iter().filter(|s| s.samples > 0 || s.total > 0).map(|s| (s.stack.as_slice(), s.samples, s.total)).collect();
        stacks.sort_by_cached_key(|&(stack, _, _)| stack.iter().map(|&f| rank[f as usize]).collect::<Vec<_>>());
        let mut tree = Tree::build_pairs(merged, stacks);
        tree.diff = true;
        tree
    }

    /// Merges sorted stacks with (value, baseline) into a tree.
    fn build_pairs(profile: &Profile, stacks: Vec<(&[u32], u64, u64)>) -> Tree {
        let mut tree = Tree { frames: Vec::new(), nodes: vec![Node { frame: 0, value: 0, children: 0, before: 0 }], diff: false };
        let mut local = vec![u32::MAX; profile.frames().len()];
        let mut path: Vec<usize> = vec![0];
        let mut prev: &[u32] = &[];
        for (stack, value, before) in stacks {
            let common = prev.iter().zip(stack).take_while(|(a, b)| a == b).count();
            path.truncate(common + 1);
            for &id in &stack[common..] {
                let frame = tree.local_frame(&mut local, id);
                tree.open_child(&mut path, frame);
            }
            for &n in &path {
                tree.nodes[n].value = tree.nodes[n].value.saturating_add(value);
                tree.nodes[n].before = tree.nodes[n].before.saturating_add(before);
            }
            prev = stack;
        }
        tree.nodes[0].frame = tree.frames.len() as u32;
        tree
    }

    /// The tree frame index of a profile frame id, assigned on first use.
    fn local_frame(&mut self, local: &mut [u32], id: u32) -> u32 {
        let slot = &mut local[id as usize];
        if *slot == u32::MAX {
            *slot = self.frames.len() as u32;
            self.frames.push(id);
        }
        *slot
    }

    /// Appends a child of the last node on `path` and pushes it on `path`.
    fn open_child(&mut self, path: &mut Vec<usize>, frame: u32) {
        let parent = *path.last().expect("path always holds the root");
        self.nodes[parent].children += 1;
        path.push(self.nodes.len());
        self.nodes.push(Node { frame, value: 0, children: 0, before: 0 });
    }

    fn is_empty(&self) -> bool {
        self.nodes[0].value == 0 && self.nodes[0].before == 0
    }

    /// Makes the nodes refer to page frames: `frames` must already hold the
    /// page frame of each tree frame; the root becomes `root`.
    fn relabel(&mut self, root: u32) {
        let local_root = self.frames.len() as u32;
        for node in &mut self.nodes {
            node.frame = match node.frame {
                f if f == local_root => root,
                f => self.frames[f as usize],
            };
        }
    }

    /// Writes the node count, then `frame, value, children` per node, as varints.
    fn write_encoded<W: Write>(&self, out: &mut W) -> io::Result<()> {
        let mut buf = Vec::with_capacity(1 << 16);
        push_varint(&mut buf, self.nodes.len() as u64);
        for node in &self.nodes {
            push_varint(&mut buf, node.frame as u64);
            push_varint(&mut buf, node.value);
            push_varint(&mut buf, node.children as u64);
            if self.diff {
                push_varint(&mut buf, node.before);
            }
            if buf.len() > (1 << 16) - 64 {
                out.write_all(&buf)?;
                buf.clear();
            }
        }
        out.write_all(&buf)
    }
}

/// The stacks with a non-zero value and that value, sorted frame by frame
/// (by name, then kind) so that stacks sharing a prefix are adjacent.
fn sorted_stacks(profile: &Profile, counter: Counter) -> Vec<(&[u32], u64)> {
    let rank = frame_ranks(profile);
    let mut stacks: Vec<(&[u32], u64)> = profile.samples().iter().map(|s| (s.stack.as_slice(), Profile::value(s, counter))).filter(|&(_, v)| v > 0).collect();
    let ranks = |stack: &[u32]| stack.iter().map(|&f| rank[f as usize]).collect::<Vec<_>>();
    stacks.sort_by_cached_key(|&(stack, _)| ranks(stack));
    stacks
}

/// The position of every frame id when frames are sorted by name, then kind.
fn frame_ranks(profile: &Profile) -> Vec<u32> {
    let frames = profile.frames();
    let mut order: Vec<usize> = (0..frames.len()).collect();
    order.sort_by(|&a, &b| frames[a].name.cmp(&frames[b].name).then(frames[a].kind.cmp(&frames[b].kind)));
    let mut rank = vec![0u32; frames.len()];
    for (r, &id) in order.iter().enumerate() {
        rank[id] = r as u32;
    }
    rank
}

/// Appends `v` as little-endian groups of 5 bits, one digit each.
fn push_varint(buf: &mut Vec<u8>, mut v: u64) {
    loop {
        let low = (v & 31) as usize;
        v >>= 5;
        if v == 0 {
            buf.push(DIGITS[low]);
            return;
        }
        buf.push(DIGITS[low | 32]);
    }
}

/// Copies `template`, letting `fill` write each `{{KEY}}`; keys it declines
/// (returns `false` for) are copied literally. Single pass, so substituted
/// text is never scanned for placeholders again.
fn render_template<W: Write>(template: &str, out: &mut W, mut fill: impl FnMut(&str, &mut W) -> io::Result<bool>) -> io::Result<()> {
    let mut rest = template;
    while let Some(open) = rest.find("{{") {
        let after = &rest[open + 2..];
        let Some(len) = after.find("}}") else { break };
        let key = &after[..len];
        out.write_all(&rest.as_bytes()[..open])?;
        let is_key = !key.is_empty() && key.bytes().all(|b| b.is_ascii_uppercase() || b == b'_');
        if !(is_key && fill(key, out)?) {
            out.write_all(&rest.as_bytes()[open..open + 2 + len + 2])?;
        }
        rest = &after[len + 2..];
    }
    out.write_all(rest.as_bytes())
}

/// `opts.title`, else the views' distinct non-blank `meta.title`s joined
/// ("CPU profile · Allocation profile"), else "Flame graph".
fn page_title(views: &[View], opts: &HtmlOptions) -> String {
    if !opts.title.trim().is_empty() {
        return opts.title.clone();
    }
    let mut titles = views.iter().map(|v| v.profile.meta.title.as_str()).filter(|t| !t.trim().is_empty());
    let Some(first) = titles.next() else { return "Flame graph".to_string() };
    let mut distinct = vec![first];
    for t in titles {
        if !distinct.contains(&t) {
            distinct.push(t);
        }
    }
    distinct.join(" · ")
}

/// The metadata line: `opts.subtitle`, or one derived from `profile.meta`.
#[cfg(test)]
fn subtitle(profile: &Profile, counter: Counter, opts: &HtmlOptions) -> String {
    subtitle_parts(profile, counter, opts).join(" · ")
}

/// The items of the metadata line ([`subtitle`]).
fn subtitle_parts(profile: &Profile, counter: Counter, opts: &HtmlOptions) -> Vec<String> {
    if !opts.subtitle.is_empty() {
        return vec![opts.subtitle.clone()];
    }
    let meta = &profile.meta;
    let has = |key: &str| meta.extra.iter().any(|(k, _)| k == key);
    let mut parts = Vec::new();
    if !meta.event.is_empty() {
        parts.push(format!("event: {}", meta.event));
    }
    if !meta.engine.is_empty() {
        parts.push(format!("engine: {}", meta.engine));
    }
    // An interval in bytes or of lock waits is a mean; the metadata may say
    // so itself ("mean interval"), in which case it is shown once, here.
    if meta.interval > 0 {
        let label = if has("mean interval") { "mean interval" } else { "interval" };
        parts.push(format!("{label}: {}", format_quantity(meta.interval, &meta.total_unit)));
    }
    let samples = profile.sum(Counter::Samples);
    if meta.event == "lock" {
        // The agent's lock counts are waiting time in units of the interval
        // (its metadata says how many waits were recorded); a JFR
        // recording's are its events, one per recorded wait.
        let recorded = meta.extra.iter().find(|(k, _)| k == "samples").and_then(|(_, v)| v.parse().ok()).unwrap_or(samples);
        parts.push(format!("{} recorded waits", group_thousands(recorded)));
    } else {
        parts.push(format!("{} samples", group_thousands(samples)));
    }
    if counter == Counter::Total {
        parts.push(format!("total: {}", format_quantity(profile.sum(Counter::Total), &meta.total_unit)));
    }
    if meta.duration_ns > 0 {
        parts.push(format!("duration: {}", format_quantity(meta.duration_ns, "ns")));
    }
    let failed = profile.samples_with_kind(FrameKind::Error);
    if failed > 0 && samples > 0 && !has("failed walks") {
        parts.push(format!("failed walks: {:.2}%", 100.0 * failed as f64 / samples as f64));
    }
    // "samples" and "mean interval" are shown above already.
    parts.extend(meta.extra.iter().filter(|(k, _)| k != "samples" && k != "mean interval").map(|(k, v)| format!("{k}: {v}")));
    parts
}

/// Formats a quantity for people: ns as ns/µs/ms/s, bytes as B/KiB/MiB/GiB.
pub fn format_quantity(v: u64, unit: &str) -> String {
    match unit {
        "ns" => scaled(v, 1000.0, &["ns", "µs", "ms", "s"]),
        "bytes" | "B" => scaled(v, 1024.0, &["B", "KiB", "MiB", "GiB", "TiB"]),
        "" => group_thousands(v),
        _ => format!("{} {}", group_thousands(v), unit),
    }
}

fn scaled(v: u64, step: f64, units: &[&str]) -> String {
    let mut x = v as f64;
    let mut i = 0;
    while x >= step && i + 1 < units.len() {
        x /= step;
        i += 1;
    }
    if i == 0 {
        format!("{} {}", v, units[0])
    } else {
        format!("{:.2} {}", x, units[i])
    }
}

fn group_thousands(v: u64) -> String {
    let digits = v.to_string();
    let first = match digits.len() % 3 {
        0 => 3,
        n => n,
    };
    let mut out = digits[..first].to_string();
    for group in digits.as_bytes()[first..].chunks(3) {
        out.push(',');
        out.extend(group.iter().map(|&b| char::from(b)));
    }
    out
}

/// Hue, saturation and lightness of a kind's frames, in the flame graph tradition.
fn palette(kind: FrameKind) -> (u16, u8, u8) {
    match kind {
        FrameKind::Interpreted => (84, 55, 62),
        FrameKind::Jit => (118, 48, 52),
        FrameKind::Inlined => (182, 58, 52),
        FrameKind::Java => (140, 42, 58),
        FrameKind::Native => (12, 78, 62),
        FrameKind::Cpp => (50, 88, 54),
        FrameKind::Kernel => (30, 88, 58),
        FrameKind::Thread => (212, 28, 80),
        FrameKind::Error => (348, 88, 46),
        FrameKind::Alloc => (215, 72, 64),
        FrameKind::State => (268, 45, 72),
        FrameKind::Lock => (330, 60, 66),
        FrameKind::Label => (190, 40, 76),
    }
}

fn kind_letter(index: usize) -> char {
    char::from(b'a' + index as u8)
}

fn palette_entry(label: &str, h: u16, s: u8, l: u8) -> String {
    let mut entry = String::from("{\"label\":");
    push_json_string(&mut entry, label);
    entry.push_str(&format!(",\"h\":{h},\"s\":{s},\"l\":{l}}}"));
    entry
}

/// Appends `s` as a JSON string literal that is also safe inside `<script>`:
/// `<`, `>` and `&` are escaped, as are U+2028/U+2029 for old JS engines.
fn push_json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => out.push_str(&format!("\\u{:04x}", c as u32)),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Writes text escaped for HTML element content and attribute values.
fn write_escaped_html<W: Write>(out: &mut W, text: &str) -> io::Result<()> {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&#39;"),
            c => escaped.push(c),
        }
    }
    out.write_all(escaped.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Frame, Meta};

    /// Review finding (collapsed_read, pprof_read): node values summed the
    /// counts of a file unchecked. They saturate.
    #[test]
    fn node_values_saturate() {
        let mut p = Profile::new(Meta::default());
        p.add_frames([Frame::new("main", FrameKind::Jit), Frame::new("a", FrameKind::Jit)], u64::MAX, 0);
        p.add_frames([Frame::new("main", FrameKind::Jit), Frame::new("b", FrameKind::Jit)], 5, 0);
        let tree = Tree::build(&p, Counter::Samples);
        assert_eq!((tree.nodes[0].value, tree.nodes[1].value), (u64::MAX, u64::MAX));
    }

    fn html(profile: &Profile, opts: &HtmlOptions) -> String {
        let mut out = Vec::new();
        write_html(profile, opts, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    /// The text between `<script ... id="{id}">` and `</script>`.
    fn script_body<'a>(page: &'a str, id: &str) -> &'a str {
        let open = page.find(&format!("id=\"{id}\">")).expect("script element present");
        let body = &page[open + id.len() + 6..];
        &body[..body.find("</script>").expect("script closed")]
    }

    /// Decodes the `fg-tree` varints back into nodes.
    fn decode_tree(text: &str) -> Vec<Node> {
        decode_tree_with(text, false)
    }

    /// Decodes a tree; diff trees carry a fourth varint per node.
    fn decode_tree_with(text: &str, diff: bool) -> Vec<Node> {
        let mut digits = text.bytes().map(|b| DIGITS.iter().position(|&d| d == b).expect("digit") as u64);
        let mut next = || {
            let (mut v, mut shift) = (0u64, 0);
            loop {
                let d = digits.next().expect("truncated tree");
                v |= (d & 31) << shift;
                shift += 5;
                if d & 32 == 0 {
                    return v;
                }
            }
        };
        let count = next();
        let nodes = (0..count).map(|_| Node { frame: next() as u32, value: next(), children: next() as u32, before: if diff { next() } else { 0 } }).collect();
        assert!(digits.next().is_none(), "trailing tree data");
        nodes
    }

    /// (name, value, children) of every node, preorder.
    fn summary(profile: &Profile, tree: &Tree) -> Vec<(String, u64, u32)> {
        let name = |f: u32| match tree.frames.get(f as usize) {
            Some(&id) => profile.frame(id).name.clone(),
            None => ROOT_NAME.to_string(),
        };
        tree.nodes.iter().map(|n| (name(n.frame), n.value, n.children)).collect()
    }

    fn jit(name: &str) -> Frame {
        Frame::new(name, FrameKind::Jit)
    }

    #[test]
    fn tree_merges_stacks_by_frame_and_sums_values() {
        let mut p = Profile::new(Meta::default());
        p.add_frames([jit("main"), jit("b"), jit("leaf2")], 2, 20);
        p.add_frames([jit("zeta")], 4, 40);
        p.add_frames([jit("main"), jit("a")], 1, 10);
        p.add_frames([jit("main"), jit("b"), jit("leaf1")], 3, 30);
        p.add_frames([jit("main"), jit("b")], 5, 50);
        p.add_frames([jit("main"), Frame::new("b", FrameKind::Interpreted)], 7, 70);
        p.add_frames([jit("idle")], 0, 0);

        let tree = Tree::build(&p, Counter::Samples);
        let expected: Vec<(String, u64, u32)> =
            [("all", 22, 2), ("main", 18, 3), ("a", 1, 0), ("b", 7, 0), ("b", 10, 2), ("leaf1", 3, 0), ("leaf2", 2, 0), ("zeta", 4, 0)]
                .iter()
                .map(|&(n, v, c)| (n.to_string(), v, c))
                .collect();
        assert_eq!(summary(&p, &tree), expected);
        // Interpreted sorts before JIT: the 7-sample "b" is the interpreted one.
        assert_eq!(p.frame(tree.frames[tree.nodes[3].frame as usize]).kind, FrameKind::Interpreted);
        // A parent's value is the sum over the stacks passing through it.
        for (i, node) in tree.nodes.iter().enumerate() {
            let kids = child_indices(&tree.nodes, i);
            assert_eq!(kids.len(), node.children as usize);
            assert!(kids.iter().map(|&k| tree.nodes[k].value).sum::<u64>() <= node.value);
        }

        let totals = Tree::build(&p, Counter::Total);
        assert_eq!(totals.nodes[0].value, 220);
        assert_eq!(totals.nodes[1].value, 180);
    }

    fn child_indices(nodes: &[Node], parent: usize) -> Vec<usize> {
        let mut kids = Vec::new();
        let mut next = parent + 1;
        for _ in 0..nodes[parent].children {
            kids.push(next);
            next = subtree_end(nodes, next);
        }
        kids
    }

    fn subtree_end(nodes: &[Node], node: usize) -> usize {
        let mut end = node + 1;
        for _ in 0..nodes[node].children {
            end = subtree_end(nodes, end);
        }
        end
    }

    #[test]
    fn encoded_tree_round_trips() {
        let mut p = Profile::new(Meta::default());
        p.add_frames([jit("A"), jit("B")], 1, u64::MAX / 2);
        p.add_frames([jit("A"), jit("C")], 40, 1 << 40);
        let tree = Tree::build(&p, Counter::Total);
        let mut out = Vec::new();
        tree.write_encoded(&mut out).unwrap();
        assert_eq!(decode_tree(std::str::from_utf8(&out).unwrap()), tree.nodes);
        for v in [0, 1, 31, 32, 1023, 1024, u64::MAX] {
            let mut enc = vec![];
            push_varint(&mut enc, 1);
            push_varint(&mut enc, 0);
            push_varint(&mut enc, v);
            push_varint(&mut enc, 0);
            assert_eq!(decode_tree(std::str::from_utf8(&enc).unwrap())[0].value, v);
        }
    }

    #[test]
    fn special_characters_are_escaped() {
        let nasty = "</script><b>\"x\"";
        let mut p = Profile::new(Meta::default());
        p.add_frames([jit(nasty), jit("C:\\dir\\$x$1 ünïcødé ☕ <!-- & \u{2028}")], 3, 3);
        let opts = HtmlOptions { title: "<script>alert('t')</script> & co".into(), ..HtmlOptions::default() };
        let page = html(&p, &opts);

        assert!(!page.contains(nasty));
        assert!(!page.contains("<b>"));
        assert!(!page.contains("<!--"));
        assert!(!page.contains("alert('t')"));
        assert!(page.contains("<title>&lt;script&gt;alert(&#39;t&#39;)&lt;/script&gt; &amp; co</title>"));
        let names = script_body(&page, "fg-names");
        assert!(names.contains(r#""\u003c/script\u003e\u003cb\u003e\"x\"""#), "{names}");
        assert!(names.contains(r#""C:\\dir\\$x$1 ünïcødé ☕ \u003c!-- \u0026 \u2028""#), "{names}");
        // Every `</script>` closes one of the template's own script elements.
        assert_eq!(page.matches("</script>").count(), page.matches("<script").count());
        assert!(!page.contains("{{"), "unfilled placeholder");
    }

    /// The rows of the page's safepoint table: the text of each cell.
    fn safepoint_rows(page: &str) -> Vec<Vec<String>> {
        let Some(open) = page.find("<tbody>") else { return Vec::new() };
        let body = &page[open + 7..open + page[open..].find("</tbody>").unwrap()];
        let cell = |c: &str| {
            let c = &c[c.rfind("<td").unwrap()..];
            c[c.find('>').unwrap() + 1..].replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
        };
        body.split("</tr>").filter(|r| !r.is_empty()).map(|r| r.split("</td>").filter(|c| c.contains("<td")).map(cell).collect()).collect()
    }

    #[test]
    fn safepoints_show_as_a_table_of_the_slowest() {
        use crate::safepoint::Safepoint;
        let mut p = Profile::new(Meta { start_ns: 1_000_000_000, ..Meta::default() });
        p.add_frames([jit("busy")], 1, 1);
        assert!(!html(&p, &HtmlOptions::default()).contains("id=\"sp-table\""), "no safepoints, no table");
        p.safepoints = (0..60u64)
            .map(|i| Safepoint {
                id: i,
                start_ns: 1_000_000_000 + i * 100_000_000,
                ttsp_ns: 1_000 * (i + 1),
                total_ns: (i % 2 == 0).then_some(5_000_000),
                operation: Some(if i == 59 { "<Dump&Co>".into() } else { "G1CollectFull".into() }),
                threads: None,
                samples: i % 3,
            })
            .collect();
        let page = html(&p, &HtmlOptions::default());
        assert!(
            page.contains("<b>Safepoints</b> 60 · time to safepoint p50 30.00 µs · p99 60.00 µs · max 60.00 µs · total 1.83 ms · the 50 slowest below"),
            "{page}"
        );
        let rows = safepoint_rows(&page);
        assert_eq!(rows.len(), SAFEPOINT_ROWS);
        assert_eq!(rows[0], ["5.900", "60.00 µs", "-", "<Dump&Co>", "2"]);
        assert_eq!(rows[1], ["5.800", "59.00 µs", "5.00 ms", "G1CollectFull", "1"]);
        assert_eq!(rows[49][1], "11.00 µs");
        assert!(page.contains("&lt;Dump&amp;Co&gt;") && !page.contains("<Dump"), "operation names are escaped");
        // Every view of the page shares one table.
        let q = p.clone();
        assert_eq!(
            html_multi(&[View::new(&p, Counter::Samples), View::new(&q, Counter::Total)], &HtmlOptions::default()).matches("id=\"sp-table\"").count(),
            1
        );
    }

    #[test]
    fn empty_profile_says_no_samples() {
        for p in [Profile::new(Meta::default()), {
            let mut p = Profile::new(Meta::default());
            p.add_frames([jit("idle")], 0, 0);
            p
        }] {
            let page = html(&p, &HtmlOptions::default());
            assert!(page.starts_with("<!DOCTYPE html>"));
            assert!(page.trim_end().ends_with("</html>"));
            assert!(page.contains("No samples were recorded"));
            assert!(!page.contains("{{"));
            assert_eq!(decode_tree(script_body(&page, "fg-tree")), vec![Node { frame: 0, value: 0, children: 0, before: 0 }]);
        }
        let mut p = Profile::new(Meta::default());
        p.add_frames([jit("busy")], 1, 1);
        assert!(!html(&p, &HtmlOptions::default()).contains("No samples were recorded"));
    }

    #[test]
    fn title_and_subtitle_come_from_options_or_meta() {
        let meta = Meta {
            title: "CPU profile".into(),
            event: "cpu".into(),
            engine: "perf_events".into(),
            interval: 10_000_000,
            total_unit: "ns".into(),
            duration_ns: 30_000_000_000,
            extra: vec![("dropped".into(), "3".into())],
            ..Meta::default()
        };
        let mut p = Profile::new(meta);
        p.add_frames([jit("main")], 2997, 29_970_000_000);
        p.add_frames([Frame::new("no_Java_frame", FrameKind::Error)], 3, 30_000_000);
        let page = html(&p, &HtmlOptions::default());
        assert!(page.contains("<h1>CPU profile</h1>"));
        assert!(page.contains("event: cpu · engine: perf_events · interval: 10.00 ms · 3,000 samples · duration: 30.00 s · failed walks: 0.10% · dropped: 3"));
        let opts = HtmlOptions { title: "Mine".into(), subtitle: "custom <line>".into(), counter: Counter::Total };
        let page = html(&p, &opts);
        assert!(page.contains("<h1>Mine</h1>") && page.contains("custom &lt;line&gt;"));
        // Frame kinds by letter, the root's last (one past the kinds).
        let kinds = format!("bi{}", kind_letter(FrameKind::ALL.len()));
        assert!(script_body(&page, "fg-config").starts_with(&format!(r#"{{"unit":"ns","kinds":"{kinds}","#)));
    }

    /// A sentence in the metadata (the allocation accuracy verdict) is
    /// folded under the metadata line, named in a summary that opens it;
    /// short items stay on the line.
    #[test]
    fn long_metadata_items_are_folded_under_the_line() {
        let verdict = "good: a sentence about how far per-site figures can be trusted, long enough to take lines of the header on a small screen";
        let meta = Meta {
            event: "alloc".into(),
            total_unit: "bytes".into(),
            extra: vec![("dropped".into(), "0".into()), ("allocation accuracy".into(), verdict.into())],
            ..Meta::default()
        };
        let mut p = Profile::new(meta);
        p.add_frames([Frame::new("A.a".to_string(), FrameKind::Jit)], 1, 100);
        let page = html(&p, &HtmlOptions::default());
        let sub = page.split("<div class=\"sub\" data-view=\"0\">").nth(1).and_then(|r| r.split("</details></div>").next()).expect("the folded block");
        let (line, folded) = sub.split_once("<details class=\"more\">").unwrap();
        assert!(line.contains("dropped: 0") && !line.contains("allocation accuracy"), "{line}");
        assert_eq!(folded, format!("<summary>allocation accuracy</summary><div>allocation accuracy: {verdict}</div>"));
    }

    /// A live-objects profile's tab reads as the agent's page names it.
    #[test]
    fn live_objects_are_named_as_on_the_agents_page() {
        let p = Profile::new(Meta { title: "Live objects".into(), event: "live".into(), total_unit: "bytes".into(), ..Meta::default() });
        assert_eq!(default_label(&p, Counter::Samples), "Live objects (samples)");
        assert_eq!(default_label(&p, Counter::Total), "Live objects (bytes)");
    }

    /// What the agent's metadata says itself (samples, mean interval,
    /// failed walks with counts) is not said twice in the header.
    #[test]
    fn subtitle_says_each_figure_once() {
        let meta = Meta {
            title: "Allocation profile".into(),
            event: "alloc".into(),
            interval: 512 << 10,
            total_unit: "bytes".into(),
            extra: vec![
                ("samples".into(), "7".into()),
                ("mean interval".into(), "524288 bytes".into()),
                ("failed walks".into(), "1 (14.29% of Java samples)".into()),
            ],
            ..Meta::default()
        };
        let mut p = Profile::new(meta);
        p.add_frames([jit("main")], 6, 6 << 19);
        p.add_frames([Frame::new("no_Java_frame", FrameKind::Error)], 1, 1 << 19);
        let line = subtitle(&p, Counter::Samples, &HtmlOptions::default());
        assert_eq!(line, "event: alloc · mean interval: 512.00 KiB · 7 samples · failed walks: 1 (14.29% of Java samples)");
    }

    /// A lock page weighs by the time waited and counts recorded waits,
    /// never the agent's counts (waiting time in units of the interval).
    #[test]
    fn lock_pages_show_time_waited_and_recorded_waits() {
        let meta = Meta {
            title: "Lock profile".into(),
            event: "lock".into(),
            interval: 1_000_000,
            total_unit: "ns".into(),
            extra: vec![("samples".into(), "3".into())],
            ..Meta::default()
        };
        let mut p = Profile::new(meta);
        p.add_frames([jit("main"), Frame::new("java.lang.Object", FrameKind::Lock)], 40, 40_000_000);
        let view = View::new(&p, Counter::Samples);
        assert_eq!((view.counter, view.label.as_str()), (Counter::Total, "Locks (time)"));
        let line = subtitle(&p, view.counter, &HtmlOptions::default());
        assert!(line.contains("3 recorded waits") && line.contains("total: 40.00 ms") && !line.contains("40 samples"), "{line}");
    }

    #[test]
    fn quantities_are_formatted_for_people() {
        assert_eq!(format_quantity(999, "ns"), "999 ns");
        assert_eq!(format_quantity(1_500_000, "ns"), "1.50 ms");
        assert_eq!(format_quantity(3 << 20, "bytes"), "3.00 MiB");
        assert_eq!(format_quantity(1_234_567, ""), "1,234,567");
        assert_eq!(format_quantity(12, "events"), "12 events");
        assert_eq!(group_thousands(0), "0");
        assert_eq!(group_thousands(999), "999");
        assert_eq!(group_thousands(100_000), "100,000");
    }

    fn html_multi(views: &[View], opts: &HtmlOptions) -> String {
        let mut out = Vec::new();
        write_html_multi(views, opts, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    /// The decoded tree of every view, in order.
    fn decode_trees(page: &str) -> Vec<Vec<Node>> {
        script_body(page, "fg-tree").split('\n').map(decode_tree).collect()
    }

    fn names_of(page: &str) -> Vec<String> {
        let json = script_body(page, "fg-names");
        json.trim_start_matches("[\"").trim_end_matches("\"]").split("\",\"").map(str::to_string).collect()
    }

    /// A CPU-like profile and an allocation-like profile of the same run.
    fn cpu_and_alloc() -> (Profile, Profile) {
        let mut cpu = Profile::new(Meta {
            title: "CPU profile".into(),
            event: "cpu".into(),
            engine: "perf_events".into(),
            interval: 10_000_000,
            total_unit: "ns".into(),
            ..Meta::default()
        });
        cpu.add_frames([jit("App.main"), jit("App.compute")], 7, 70_000_000);
        cpu.add_frames([jit("App.main"), Frame::new("write", FrameKind::Native)], 3, 30_000_000);
        let mut alloc = Profile::new(Meta {
            title: "Allocation profile".into(),
            event: "alloc".into(),
            interval: 512 * 1024,
            total_unit: "bytes".into(),
            ..Meta::default()
        });
        alloc.add_frames([jit("App.main"), jit("App.load"), Frame::new("byte[]", FrameKind::Alloc)], 2, 1 << 20);
        alloc.add_frames([jit("App.main"), jit("App.name"), Frame::new("java.lang.String", FrameKind::Alloc)], 1, 1 << 19);
        (cpu, alloc)
    }

    #[test]
    fn two_views_embed_both_profiles_with_their_labels_and_units() {
        let (cpu, alloc) = cpu_and_alloc();
        let views = [View::new(&cpu, Counter::Samples), View { label: "Allocations <heap>".into(), profile: &alloc, counter: Counter::Total, leak: None }];
        let page = html_multi(&views, &HtmlOptions::default());

        // Frame names of both profiles, each (name, kind) once, the root last.
        let names = names_of(&page);
        for name in ["App.main", "App.compute", "write", "App.load", "byte[]", "App.name", "java.lang.String"] {
            assert_eq!(names.iter().filter(|n| *n == name).count(), 1, "{name} in {names:?}");
        }
        assert_eq!(names.len(), 8);
        assert_eq!(names.last().map(String::as_str), Some(ROOT_NAME));

        // One tree per view, with the view's counter, over the shared names.
        let trees = decode_trees(&page);
        assert_eq!(trees.len(), 2);
        assert_eq!(trees[0][0].value, 10);
        assert_eq!(trees[1][0].value, 3 << 19);
        let config = script_body(&page, "fg-config");
        let kinds = config.split("\"kinds\":\"").nth(1).unwrap().split('"').next().unwrap();
        assert_eq!(kinds.len(), names.len());
        for tree in &trees {
            assert_eq!(tree[0].frame as usize, names.len() - 1, "root is the last name");
            assert!(tree.iter().all(|n| (n.frame as usize) < names.len()));
        }
        let alloc_leaf = trees[1].iter().find(|n| names[n.frame as usize] == "byte[]").expect("allocated class in the second tree");
        assert_eq!(alloc_leaf.value, 1 << 20);
        let letter = kinds.as_bytes()[alloc_leaf.frame as usize];
        assert_eq!(letter, b'a' + FrameKind::Alloc.index() as u8);

        // Labels in the tab bar (escaped) and in the config, units per view.
        assert!(page.contains("role=\"tablist\""));
        assert!(page.contains(">CPU (samples)</button>"));
        assert!(page.contains(">Allocations &lt;heap&gt;</button>"));
        assert!(config.contains(r#""views":[{"label":"CPU (samples)","unit":"samples"},{"label":"Allocations \u003cheap\u003e","unit":"bytes"}]"#), "{config}");
        assert_eq!(page.matches("aria-selected=\"true\"").count(), 1);

        // A subtitle per view, only the first shown; the title names both profiles.
        assert!(page.contains("<div class=\"sub\" data-view=\"0\">event: cpu · engine: perf_events · interval: 10.00 ms · 10 samples</div>"));
        assert!(page.contains("<div class=\"sub\" data-view=\"1\" hidden>event: alloc · interval: 512.00 KiB · 3 samples · total: 1.50 MiB</div>"));
        assert!(page.contains("<h1>CPU profile · Allocation profile</h1>"));
        assert!(!page.contains("No samples were recorded"));
        assert!(!page.contains("{{"));
        assert_eq!(page.matches("</script>").count(), page.matches("<script").count());
    }

    #[test]
    fn single_view_page_has_no_tab_bar() {
        let (cpu, _) = cpu_and_alloc();
        let page = html(&cpu, &HtmlOptions::default());
        assert!(!page.contains("<nav"));
        assert!(!page.contains("role=\"tab"));
        assert!(page.contains("<h1>CPU profile</h1>"));
        assert!(page.contains("<div class=\"sub\" data-view=\"0\">event: cpu"));
        assert_eq!(decode_trees(&page).len(), 1);
        // write_html is write_html_multi with one view.
        let multi = html_multi(&[View::new(&cpu, Counter::Samples)], &HtmlOptions::default());
        assert_eq!(multi, page);
    }

    #[test]
    fn an_empty_view_says_no_samples_in_that_view_only() {
        let (cpu, _) = cpu_and_alloc();
        let nothing = Profile::new(Meta { event: "alloc".into(), total_unit: "bytes".into(), ..Meta::default() });
        let page = html_multi(&[View::new(&cpu, Counter::Samples), View::new(&nothing, Counter::Total)], &HtmlOptions::default());
        assert_eq!(page.matches("No samples were recorded").count(), 1);
        assert!(page.contains("<p class=\"empty\" data-view=\"1\" hidden>No samples were recorded.</p>"));
        assert!(page.contains(">Allocations (bytes)</button>"));
        assert!(page.contains("data-view=\"1\" hidden>event: alloc · 0 samples · total: 0 B</div>"));
        let trees = decode_trees(&page);
        assert_eq!(trees.len(), 2);
        assert_eq!(trees[0][0].value, 10);
        assert_eq!(trees[1].len(), 1);
        assert_eq!(trees[1][0].value, 0);
        assert_eq!(trees[1][0].frame as usize, names_of(&page).len() - 1);

        // An empty first view shows its note; the other view's graph is unaffected.
        let page = html_multi(&[View::new(&nothing, Counter::Total), View::new(&cpu, Counter::Samples)], &HtmlOptions::default());
        assert!(page.contains("<p class=\"empty\" data-view=\"0\">No samples were recorded.</p>"));
        assert_eq!(decode_trees(&page)[1][0].value, 10);

        // No views at all: an empty page.
        let page = html_multi(&[], &HtmlOptions::default());
        assert!(page.contains("No samples were recorded") && !page.contains("<nav"));
    }

    #[test]
    fn default_labels_name_event_and_counter() {
        let (cpu, alloc) = cpu_and_alloc();
        assert_eq!(default_label(&cpu, Counter::Samples), "CPU (samples)");
        assert_eq!(default_label(&cpu, Counter::Total), "CPU (time)");
        assert_eq!(default_label(&alloc, Counter::Total), "Allocations (bytes)");
        assert_eq!(default_label(&alloc, Counter::Samples), "Allocations (samples)");
        assert_eq!(default_label(&Profile::default(), Counter::Samples), "Profile (samples)");
        let blank = View { label: " ".into(), profile: &alloc, counter: Counter::Total, leak: None };
        assert_eq!(blank.display_label(), "Allocations (bytes)");
    }

    #[test]
    fn page_title_is_the_option_or_the_profiles_titles() {
        let (cpu, alloc) = cpu_and_alloc();
        let both = [View::new(&cpu, Counter::Samples), View::new(&alloc, Counter::Total)];
        // A CPU + allocation page is not titled "CPU profile" on every tab.
        assert_eq!(page_title(&both, &HtmlOptions::default()), format!("{} · {}", cpu.meta.title, alloc.meta.title));
        assert_eq!(page_title(&[], &HtmlOptions::default()), "Flame graph");
        let opts = HtmlOptions { title: "My App".into(), ..HtmlOptions::default() };
        assert_eq!(page_title(&both, &opts), "My App");
        let same = [View::new(&cpu, Counter::Samples), View::new(&cpu, Counter::Total)];
        assert_eq!(page_title(&same, &HtmlOptions::default()), "CPU profile");
    }

    #[test]
    fn diff_page_carries_both_values_per_node() {
        let mut before = Profile::new(Meta { event: "cpu".into(), ..Meta::default() });
        before.add_frames([Frame::new("main", FrameKind::Jit), Frame::new("a", FrameKind::Jit)], 6, 0);
        before.add_frames([Frame::new("main", FrameKind::Jit), Frame::new("gone", FrameKind::Jit)], 4, 0);
        let mut after = Profile::new(Meta { event: "cpu".into(), ..Meta::default() });
        // Same method, other kind: still matched by name.
        after.add_frames([Frame::new("main", FrameKind::Interpreted), Frame::new("a", FrameKind::Jit)], 2, 0);
        after.add_frames([Frame::new("main", FrameKind::Interpreted), Frame::new("new", FrameKind::Jit)], 8, 0);
        let mut out = Vec::new();
        write_html_diff(&before, &after, Counter::Samples, &HtmlOptions::default(), &mut out).unwrap();
        let page = String::from_utf8(out).unwrap();
        assert!(script_body(&page, "fg-config").contains("\"diff\":true"));
        let names: Vec<String> = names_of(&page);
        let nodes = decode_tree_with(script_body(&page, "fg-tree"), true);
        let node = |name: &str| nodes.iter().find(|n| names[n.frame as usize] == name).unwrap_or_else(|| panic!("{name}"));
        assert_eq!((nodes[0].value, nodes[0].before), (10, 10));
        assert_eq!((node("main").value, node("main").before), (10, 10));
        assert_eq!((node("a").value, node("a").before), (2, 6));
        assert_eq!((node("new").value, node("new").before), (8, 0));
        assert_eq!((node("gone").value, node("gone").before), (0, 4));
        assert!(page.contains("before: 10 samples · after: 10 samples"));
    }

    /// A deterministic xorshift generator for synthetic profiles.
    fn rng(seed: u64) -> impl FnMut(u64) -> u64 {
        let mut x = seed;
        move |bound| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % bound
        }
    }

    #[test]
    fn hundred_thousand_distinct_stacks_stay_compact() {
        let mut p = Profile::new(Meta::default());
        let mut next = rng(0x9E37_79B9_7F4A_7C15);
        let pool: Vec<u32> =
            (0..5000).map(|i| p.intern(Frame::new(format!("com.example.pkg{}.Class{}.method{}", i % 40, i % 700, i), FrameKind::Jit))).collect();
        let threads: Vec<u32> = (0..16).map(|i| p.intern(Frame::new(format!("worker-{i}"), FrameKind::Thread))).collect();
        let mut expected_total = 0;
        for i in 0..100_000u32 {
            let depth = 30 + next(31) as usize;
            let mut stack = vec![threads[next(16) as usize]];
            // A shared 20-frame prefix, then frames varying per stack; the
            // last frame is unique so every stack is distinct.
            stack.extend((0..20).map(|d| pool[d * 7 + next(2) as usize]));
            stack.extend((stack.len()..depth - 1).map(|_| pool[next(pool.len() as u64) as usize]));
            stack.push(p.intern(Frame::new(format!("leaf{i}"), FrameKind::Inlined)));
            let samples = 1 + next(20);
            expected_total += samples;
            p.add(stack, samples, samples * 10_000_000);
        }
        assert_eq!(p.samples().len(), 100_000);

        let page = html(&p, &HtmlOptions::default());
        assert!(page.len() < 40 << 20, "page is {} bytes", page.len());
        let nodes = decode_tree(script_body(&page, "fg-tree"));
        assert_eq!(nodes[0].value, expected_total);
        assert!(nodes.len() > 100_000);
        let names: usize = script_body(&page, "fg-names").matches("\",\"").count() + 1;
        assert_eq!(names, p.frames().len() + 1);
    }

    /// F4: a live view with a leak report lists its sites above the graph
    /// in the report's order (whatever order they come in), escaped, with
    /// what it left out; the other tab names the top suspect; a page
    /// without a report has neither.
    #[test]
    fn a_leak_report_is_listed_on_its_tab_in_ranked_order() {
        use crate::leak::{LeakReport, Point, Site};
        let site = |method: &str, class: &str, live: f64, series: &[(f64, f64)]| Site {
            frames: vec![jit("Main.main"), jit(method), Frame::new(class, FrameKind::Alloc)],
            live_bytes: live,
            live_objects: live / 1000.0,
            tracked: 7,
            old_share: 1.0,
            series: series.iter().map(|&(secs, bytes)| Point { secs, bytes }).collect(),
            ..Site::default()
        };
        let cache = site("Cache.fill", "long[]", 64e6, &[(0.0, 64e6), (1.0, 64e6), (2.0, 64e6), (3.0, 64e6)]);
        let leak = site("A$Session.<init>", "byte[]", 8e6, &[(0.0, 2e6), (1.0, 4e6), (2.0, 6e6), (3.0, 8e6)]);
        let report = LeakReport {
            duration_secs: 3.0,
            gcs: 12,
            unjudged_bytes: 3.0 * 1048576.0,
            unjudged_tracked: 48,
            sites: vec![cache, leak],
            ..LeakReport::default()
        };
        let live = report.to_profile();
        let mut alloc = Profile::new(Meta { event: "alloc".into(), total_unit: "bytes".into(), ..Meta::default() });
        alloc.add_frames([jit("Main.main"), Frame::new("byte[]", FrameKind::Alloc)], 1, 10);
        let views = [View::new(&alloc, Counter::Total), View::new(&live, Counter::Total).with_leak(Some(&report))];
        let mut out = Vec::new();
        write_html_multi(&views, &HtmlOptions::default(), &mut out).unwrap();
        let page = String::from_utf8(out).unwrap();
        let head = &page[..page.find("<main").unwrap()];
        let first = head.find("data-rank=\"1\"").expect("no table");
        let second = head.find("data-rank=\"2\"").unwrap();
        assert!(head[first..second].contains("data-site=\"A$Session.&lt;init&gt;\"") && head[first..second].contains("data-class=\"byte[]\""), "{head}");
        assert!(head[second..].contains("data-score=\"0\" data-live=\"64000000\" data-class=\"long[]\""), "{head}");
        assert!(head.contains("<details class=\"leaks\" data-view=\"1\" hidden open>") && !head.contains("<init>"), "{head}");
        assert!(head.contains("left out: 3.0 MiB in 48 tracked samples"), "{head}");
        assert!(head.contains("<div class=\"leak-hint\" data-view=\"0\">") && head.contains("data-goto-tab=\"1\""), "{head}");
        // Without a report: nothing of it.
        let plain = html(&live, &HtmlOptions::default());
        assert!(!plain.contains("data-rank=") && !plain.contains("class=\"leak-hint\"") && !plain.contains("class=\"leaks\""));
    }
}
