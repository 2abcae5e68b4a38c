//! `oxprof convert IN -o OUT`: a JFR recording (the JDK's or oxprof's), a
//! pprof file or collapsed stacks into an HTML flame graph, collapsed
//! stacks, pprof, an OTLP profiles payload or a text summary, with the shared selection filters. The
//! HTML page and the text summary show the recording's safepoints too.

use std::fs::File;
use std::io::{BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use oxprof_profile::collapsed::{self, CollapsedOptions};
use oxprof_profile::flamegraph::{self, HtmlOptions, View};
use oxprof_profile::{otlp, pprof, Counter, Meta, OutputFormat, Profile};

use crate::input::{self, Selection};
use crate::report;

/// Convert a recording: JFR/pprof/collapsed in, flame graph/collapsed/pprof/OTLP/text out
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  oxprof convert rec.jfr -o cpu.html --cpu\n  oxprof convert rec.jfr -o mem.pb.gz --alloc\n  OTEL_SERVICE_NAME=shop oxprof convert rec.jfr -o rec.otlp.pb --cpu --alloc --threads\n  oxprof convert rec.jfr -o sleep.collapsed --wall --state sleeping,parked\n  oxprof convert rec.jfr -o hot.collapsed --from 10s --to 20s --include 'com\\.example'\n  oxprof convert rec.jfr --label endpoint=\"GET /orders\" -o orders.html\n  oxprof convert rec.jfr --by endpoint -o by-endpoint.html\n  oxprof convert rec.jfr -o summary.txt                (the text summary `oxprof report` prints)\n\nCollapsed and pprof output hold one profile per file: with several kinds the\nsecond and later go beside the first (out.alloc.pb.gz); in pprof, live objects\njoin the allocations as Go's heap profiles have them. HTML shows all as tabs; OTLP\n(an uncompressed ExportProfilesServiceRequest) holds all in one request, its resource\nfrom OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES.\n\n-o - writes to stdout: collapsed stacks unless --format says otherwise. Stdout holds\none collapsed or pprof profile: when the input has several kinds, pick one with\n--cpu, --wall, --alloc, --live or --lock (or write to a file).\n  oxprof convert rec.jfr --wall -o - | grep Worker"
)]
pub struct ConvertArgs {
    /// A JFR recording, a pprof file or collapsed stacks
    pub input: PathBuf,
    /// Output file; the format follows the extension (.html flame graph, .collapsed stacks,
    /// .txt text summary, .pb.gz/.pprof pprof, .otlp.pb OTLP); - for stdout (collapsed stacks
    /// unless --format is given)
    #[arg(short, long)]
    pub output: PathBuf,
    /// Output format, overriding the extension
    #[arg(long, value_parser = ["flamegraph", "html", "collapsed", "pprof", "otlp", "text"])]
    pub format: Option<String>,
    /// Widths show estimated totals (CPU time, bytes) instead of sample counts
    #[arg(long)]
    pub total: bool,
    #[command(flatten)]
    pub selection: Selection,
}

/// An output format of the converter: the profile formats plus a text summary.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Target {
    Format(OutputFormat),
    Text,
}

fn target(args: &ConvertArgs) -> Result<Target, String> {
    match args.format.as_deref() {
        Some("text") => Ok(Target::Text),
        Some(w) => OutputFormat::from_word(w).map(Target::Format).ok_or_else(|| format!("unknown format '{w}'")),
        // Stdout: collapsed stacks, the format pipes take.
        None if args.output == Path::new("-") => Ok(Target::Format(OutputFormat::Collapsed)),
        // `.txt` is the text summary, as the agent's `.txt` is its text
        // leak report (the profile crate reads `.txt` as collapsed stacks).
        None if args.output.extension().is_some_and(|e| e.eq_ignore_ascii_case("txt")) => Ok(Target::Text),
        None => OutputFormat::from_path(&args.output).map(Target::Format).ok_or_else(|| {
            format!(
                "cannot tell the format from '{}': use .html, .collapsed, .txt (text summary), .pb.gz, .pprof or .otlp.pb, or --format {{flamegraph,collapsed,pprof,otlp,text}}",
                args.output.display()
            )
        }),
    }
}

pub fn run(args: ConvertArgs) -> Result<ExitCode, String> {
    let target = target(&args)?;
    if target == Target::Format(OutputFormat::Jfr) {
        return Err(
            "convert writes .html, .collapsed, .pb.gz/.pprof, .otlp.pb or --format text; JFR is written by the agent while recording (file=rec.jfr)".into()
        );
    }
    if args.output == Path::new("-") && matches!(target, Target::Format(OutputFormat::Pprof | OutputFormat::Otlp)) && std::io::stdout().is_terminal() {
        return Err("-o -: binary output (pprof, OTLP) to a terminal; redirect it (> out.pb.gz) or use -o FILE".into());
    }
    args.selection.check()?;
    input::not_an_input(&args.output, &args.output, &[&args.input])?;
    let mut selection = args.selection.clone();
    // pprof carries states as labels, OTLP as attributes, the text report
    // as its state table.
    selection.show_state |= matches!(target, Target::Text | Target::Format(OutputFormat::Pprof | OutputFormat::Otlp));
    let input = input::load(&args.input)?;
    let safepoints = report::Safepoints::of(&input, &selection)?;
    // HTML and text show safepoints: a recording of safepoints alone converts.
    let shows_safepoints = matches!(target, Target::Text | Target::Format(OutputFormat::FlameGraph)) && !safepoints.list.is_empty();
    let profiles = match selection.profiles(&input, &args.input) {
        Err(_) if shows_safepoints && safepoints.alone(&input, &selection) => Vec::new(),
        p => p?,
    };
    if profiles.iter().all(|(_, p)| p.is_empty()) && !shows_safepoints {
        return Err(selection.nothing_left(&args.input));
    }
    for note in selection.unread_kinds(&input, &profiles) {
        errln!("oxprof: note: {}: {note}", args.input.display());
    }
    if args.total {
        input::totals_recorded(&profiles, &args.input)?;
    }
    let counter = if args.total { Counter::Total } else { Counter::Samples };
    // The text summary and the HTML page's live tab show the leak report.
    let leak = if matches!(target, Target::Text | Target::Format(OutputFormat::FlameGraph)) { report::leak_report(&input, &selection)? } else { None };
    let summary = (leak.as_ref(), report::Tables { top: 20, threads: selection.threads });
    let written = write(&profiles, &safepoints, summary, target, counter, &args.output, &args.input)?;
    for path in written {
        errln!("oxprof: wrote {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

fn write(
    profiles: &[(&str, Profile)],
    safepoints: &report::Safepoints,
    // The text summary's leak report and tables.
    (leak, tables): (Option<&crate::report::LeakFacts>, report::Tables),
    target: Target,
    counter: Counter,
    out: &Path,
    input: &Path,
) -> Result<Vec<PathBuf>, String> {
    // Every file is checked before the first is written.
    let check = |paths: &[&PathBuf]| paths.iter().try_for_each(|p| input::not_an_input(out, p, &[input]));
    let mut plain: Vec<Profile> = profiles.iter().map(|(_, p)| p.without_lines()).collect();
    let mut written = Vec::new();
    let stdout = out == Path::new("-");
    match target {
        Target::Format(OutputFormat::FlameGraph) => {
            if plain.is_empty() {
                // Safepoints alone: a page of their table.
                let mut only = Profile::new(Meta { title: "Safepoints".into(), start_ns: safepoints.start_ns, ..Meta::default() });
                only.safepoints = safepoints.list.clone();
                plain.push(only);
            }
            // The live profile's tab lists the leak report's top sites.
            let views: Vec<View> = plain
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    let live = profiles.get(i).is_some_and(|(key, _)| *key == "live");
                    View::new(p, counter).with_leak(leak.filter(|_| live).map(|l| &l.report))
                })
                .collect();
            emit(out, |w| flamegraph::write_html_multi(&views, &HtmlOptions { counter, ..HtmlOptions::default() }, w))?;
            written.push(out.to_path_buf());
        }
        Target::Text => {
            emit(out, |w| report::write_report(profiles, safepoints, leak, tables, w))?;
            written.push(out.to_path_buf());
        }
        Target::Format(OutputFormat::Pprof) => {
            // Live objects join the allocations' file, as Go's heap profiles have them.
            let mut groups: Vec<(PathBuf, Vec<&Profile>)> = Vec::new();
            let mut alloc_group = None;
            for (key, p) in profiles {
                if *key == "live" {
                    if let Some(g) = alloc_group {
                        let group: &mut (PathBuf, Vec<&Profile>) = &mut groups[g];
                        group.1.push(p);
                        continue;
                    }
                }
                let path = if groups.is_empty() { out.to_path_buf() } else { input::sibling(out, key) };
                if *key == "alloc" {
                    alloc_group = Some(groups.len());
                }
                groups.push((path, vec![p]));
            }
            if stdout {
                one_on_stdout(groups.len(), profiles)?;
            }
            check(&groups.iter().map(|g| &g.0).collect::<Vec<_>>())?;
            for (path, parts) in groups {
                emit(&path, |w| pprof::write_parts(&parts, w))?;
                written.push(path);
            }
        }
        Target::Format(OutputFormat::Otlp) => {
            // One request: every kind shares its dictionary.
            let resource = otlp::Resource::from_env("java");
            emit(out, |w| otlp::write(&profiles.iter().map(|(_, p)| p).collect::<Vec<_>>(), &resource, w))?;
            written.push(out.to_path_buf());
        }
        Target::Format(_) => {
            if stdout {
                one_on_stdout(profiles.len(), profiles)?;
            }
            let paths: Vec<PathBuf> =
                profiles.iter().enumerate().map(|(i, (key, _))| if i == 0 { out.to_path_buf() } else { input::sibling(out, key) }).collect();
            check(&paths.iter().collect::<Vec<_>>())?;
            for (i, path) in paths.into_iter().enumerate() {
                emit(&path, |w| collapsed::write(&plain[i], CollapsedOptions { counter, annotate: false }, w))?;
                written.push(path);
            }
        }
    }
    Ok(written.into_iter().filter(|p| p != Path::new("-")).collect())
}

/// Stdout holds one collapsed or pprof profile: no side files are named
/// after `-`; with several kinds (`files` of them) the user picks one.
fn one_on_stdout(files: usize, profiles: &[(&str, Profile)]) -> Result<(), String> {
    if files <= 1 {
        return Ok(());
    }
    let kinds: Vec<&str> = profiles.iter().map(|(k, _)| *k).collect();
    Err(format!(
        "-o - writes one profile to stdout, and this input has {}: pick one with {}, or write to a file (the others go beside it)",
        kinds.join(", "),
        kinds.iter().map(|k| format!("--{k}")).collect::<Vec<_>>().join(", ")
    ))
}

/// Writes to a file, or stdout for `-`. Stdout closed by its reader (`| head`)
/// ends the output quietly, as other command-line tools do.
pub fn emit(path: &Path, f: impl FnOnce(&mut dyn Write) -> std::io::Result<()>) -> Result<(), String> {
    let res = if path == Path::new("-") {
        let mut out = std::io::stdout().lock();
        match f(&mut out).and_then(|()| out.flush()) {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
            r => r,
        }
    } else {
        let file = File::create(path).map_err(|e| format!("cannot create {}: {e}", path.display()))?;
        let mut w = BufWriter::new(file);
        f(&mut w).and_then(|()| w.flush())
    };
    res.map_err(|e| format!("cannot write {}: {e}", path.display()))
}
