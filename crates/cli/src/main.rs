//! `oxprof`: the command-line front end of the oxprof profiler.
//!
//! Subcommands: `record` runs a Java command with the agent loaded, `attach`
//! and `list` work on running JVMs, `demo` compiles and profiles the bundled
//! demo program; `convert`, `diff` and `report` work on recorded files. Each lives in its own module;
//! `print` writes the CLI's messages without panicking on a closed or full stdout or stderr.

#[macro_use]
mod print;

mod agent;
mod agent_opts;
mod attach;
mod convert;
mod demo;
mod diff;
mod input;
mod record;
mod report;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "oxprof", version, about = "A low-overhead profiler for the JVM", long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    Record(record::RecordArgs),
    Attach(attach::AttachArgs),
    /// List the running JVMs: pid, JDK version, whether oxprof is loaded, main class
    List,
    Demo(demo::DemoArgs),
    Convert(convert::ConvertArgs),
    Diff(diff::DiffArgs),
    Report(report::ReportArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Record(args) => record::run(args),
        Command::Attach(args) => attach::run(args),
        Command::List => attach::list(),
        Command::Demo(args) => demo::run(args),
        Command::Convert(args) => convert::run(args),
        Command::Diff(args) => diff::run(args),
        Command::Report(args) => report::run(args),
    };
    match result {
        // A stdout that failed (full, not closed by its reader) was said.
        Ok(_) if print::stdout_failed() => ExitCode::from(2),
        Ok(code) => code,
        Err(e) => {
            errln!("oxprof: {e}");
            ExitCode::from(2)
        }
    }
}
