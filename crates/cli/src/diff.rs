//! `oxprof diff BEFORE AFTER -o OUT`: a differential flame graph (HTML) or
//! two-count collapsed stacks (`stack before after`, as FlameGraph's
//! `difffolded.pl` writes) of one kind of profile from two files.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use oxprof_profile::flamegraph::{self, HtmlOptions};
use oxprof_profile::model::thread_of_root;
use oxprof_profile::{Counter, Frame, FrameKind, OutputFormat, Profile};

use crate::convert::emit;
use crate::input::{self, Selection};

/// Differential flame graph of two recordings (red grew, blue shrank)
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  oxprof diff before.jfr after.jfr -o diff.html\n  oxprof diff before.jfr after.jfr -o diff.collapsed --alloc --total\n  oxprof diff before.jfr after.jfr -o blocked.html --wall --state blocked,waiting,parked\n\nShares are normalised by each file's total, so recordings of different\nlengths compare. The collapsed output has two counts per line: before, after.\n\n-o - writes the collapsed form to stdout (as convert -o - writes collapsed stacks).\n  oxprof diff before.jfr after.jfr -o - --cpu | grep Worker"
)]
pub struct DiffArgs {
    /// The baseline: a JFR recording, a pprof file or collapsed stacks
    /// (blue where AFTER has less)
    pub before: PathBuf,
    /// The file compared with BEFORE, of the same kinds (red where it has more)
    pub after: PathBuf,
    /// Output file: .html (flame graph) or .collapsed/.folded/.txt (two counts per line);
    /// - for stdout (two counts per line)
    #[arg(short, long)]
    pub output: PathBuf,
    /// Compare estimated totals (CPU time, bytes) instead of sample counts
    #[arg(long)]
    pub total: bool,
    #[command(flatten)]
    pub selection: Selection,
}

pub fn run(args: DiffArgs) -> Result<ExitCode, String> {
    let stdout = args.output == Path::new("-");
    // Stdout gets the collapsed form, the one pipes take (as for convert).
    let format = match (stdout, OutputFormat::from_path(&args.output)) {
        (true, _) => OutputFormat::Collapsed,
        (false, Some(f)) => f,
        (false, None) => {
            return Err(format!(
                "-o {}: diff writes .html (a flame graph) or .collapsed, .folded or .txt (two counts per line), or - for stdout",
                args.output.display()
            ))
        }
    };
    if matches!(format, OutputFormat::Pprof | OutputFormat::Jfr | OutputFormat::Otlp) {
        return Err("diff writes .html or .collapsed; pprof, JFR and OTLP have no diff form (use `go tool pprof -diff_base` on two converted files)".into());
    }
    args.selection.check()?;
    input::not_an_input(&args.output, &args.output, &[&args.before, &args.after])?;
    let before = input::load(&args.before)?;
    let after = input::load(&args.after)?;
    // The selection's errors name the file.
    // A kind flag selects from the file that has kinds; collapsed stacks
    // beside it (which do not say their kind) are read as they are.
    let for_input = |input: &input::Input| {
        if input.counts_only() && !(before.counts_only() && after.counts_only()) {
            args.selection.without_kinds()
        } else {
            args.selection.clone()
        }
    };
    let b = for_input(&before).profiles(&before, &args.before)?;
    let a = for_input(&after).profiles(&after, &args.after)?;
    // One kind is compared: when a file holds several, the user says which.
    let sel = &args.selection;
    let flags = [("cpu", sel.cpu), ("wall", sel.wall), ("alloc", sel.alloc), ("live", sel.live), ("lock", sel.lock)];
    let asked: Vec<&str> = flags.iter().filter_map(|(k, given)| given.then_some(*k)).collect();
    if asked.len() > 1 {
        return Err(format!("diff compares one kind of samples: give one of {}", asked.iter().map(|k| format!("--{k}")).collect::<Vec<_>>().join(", ")));
    }
    for (file, kinds) in [(&args.before, &b), (&args.after, &a)] {
        if kinds.len() > 1 {
            let keys: Vec<String> = kinds.iter().map(|(k, _)| format!("--{k}")).collect();
            return Err(format!(
                "{} holds several kinds of samples ({}) and diff compares one: pick it with {}",
                file.display(),
                kinds.iter().map(|(k, _)| *k).collect::<Vec<_>>().join(", "),
                keys.join(", ")
            ));
        }
    }
    if args.total {
        input::totals_recorded(&b, &args.before)?;
        input::totals_recorded(&a, &args.after)?;
    }
    let (key, after_p) = a.into_iter().next().ok_or("no profile in the second file")?;
    let (before_key, before_p) = b.into_iter().next().ok_or("no profile in the first file")?;
    // A file of one profile (collapsed stacks, pprof) takes the other's kind.
    let single = |p: &Profile| p.meta.counts_only();
    if before_key != key && !single(&before_p) && !single(&after_p) {
        return Err(format!("{} holds {before_key} samples and {} {key} samples: there is nothing to compare", args.before.display(), args.after.display()));
    }
    let kind = if single(&after_p) { before_key } else { key };
    let counter = if args.total { Counter::Total } else { Counter::Samples };
    let (before_p, after_p) = (comparable(&before_p), comparable(&after_p));
    match format {
        OutputFormat::FlameGraph => emit(&args.output, |w| flamegraph::write_html_diff(&before_p, &after_p, counter, &HtmlOptions::default(), w))?,
        _ => emit(&args.output, |w| write_collapsed_diff(&before_p, &after_p, counter, w))?,
    }
    if !stdout {
        errln!("oxprof: wrote {} ({kind} samples compared)", args.output.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// A profile as two runs compare: frames by name alone, so what differs
/// from run to run of the same code does not split a stack in two: no
/// source lines, thread roots without the agent's ` tid=N` (`[pool-1 tid=4711]`
/// → `[pool-1]`), and a Java method whether interpreted, compiled or
/// inlined this time (JIT decisions differ between runs) one kind, `Java`.
fn comparable(p: &Profile) -> Profile {
    p.map_frames(|f| match f.kind {
        FrameKind::Thread => {
            let (name, _) = thread_of_root(&f.name);
            Frame::new(format!("[{name}]"), FrameKind::Thread)
        }
        FrameKind::Interpreted | FrameKind::Jit | FrameKind::Inlined => Frame::new(f.name.clone(), FrameKind::Java),
        kind => Frame::new(f.name.clone(), kind),
    })
}

/// `frame;frame before after` per distinct stack of either profile.
fn write_collapsed_diff(before: &Profile, after: &Profile, counter: Counter, out: &mut dyn Write) -> std::io::Result<()> {
    // Lock profiles compare time waited, as the page does.
    let counter = flamegraph::shown_counter(after, counter);
    let merged = flamegraph::merge_for_diff(before, after, counter);
    for s in merged.samples() {
        let names: Vec<String> = s.stack.iter().map(|&f| merged.frame(f).name.replace(';', ":")).collect();
        writeln!(out, "{} {} {}", names.join(";"), s.total, s.samples)?;
    }
    Ok(())
}
