//! `oxprof`: the command-line front end of the oxprof profiler.
//!
//! Subcommands: `record` runs a Java command with the agent loaded, `attach`
//! and `list` work on running JVMs, `demo` compiles and profiles the bundled
//! demo program. Each lives in its own module.

mod agent;
mod agent_opts;
mod attach;
mod demo;
mod record;

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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Record(args) => record::run(args),
        Command::Attach(args) => attach::run(args),
        Command::List => attach::list(),
        Command::Demo(args) => demo::run(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("oxprof: {e}");
            ExitCode::from(2)
        }
    }
}
