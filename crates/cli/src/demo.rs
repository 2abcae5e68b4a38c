//! `oxprof demo`: compiles the bundled demo program with `javac` and profiles
//! it, so a newcomer sees a flame graph with one command.

use std::path::PathBuf;
use std::process::{Command, ExitCode};

use clap::Args;

use crate::agent;
use crate::agent_opts::SampleArgs;
use crate::record::{self, RecordArgs};

const DEMO_SOURCE: &str = include_str!("../../../demo/Demo.java");

#[derive(Args, Debug)]
#[command(about = "Compile and profile the bundled demo Java program", after_help = "Example:\n  oxprof demo -o demo.html && xdg-open demo.html")]
pub struct DemoArgs {
    /// Output file (.html flame graph or .collapsed stacks)
    #[arg(short, long, default_value = "demo.html")]
    pub output: PathBuf,
    /// How long the demo runs, in seconds
    #[arg(long, default_value_t = 5.0)]
    pub seconds: f64,
    /// Sampling interval
    #[arg(short, long, default_value = "10ms")]
    pub interval: String,
}

pub fn run(args: DemoArgs) -> Result<ExitCode, String> {
    let javac = agent::jdk_tool("javac")?;
    let java = agent::jdk_tool("java")?;
    // SAFETY: getuid cannot fail.
    let dir = std::env::temp_dir().join(format!("oxprof-demo-{}", unsafe { libc::getuid() }));
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let src = dir.join("Demo.java");
    std::fs::write(&src, DEMO_SOURCE).map_err(|e| format!("cannot write {}: {e}", src.display()))?;
    eprintln!("[oxprof] compiling the demo with {}", javac.display());
    let st = Command::new(&javac).arg("-d").arg(&dir).arg(&src).status().map_err(|e| format!("cannot run javac: {e}"))?;
    if !st.success() {
        return Err(format!("javac failed on {}", src.display()));
    }
    eprintln!("[oxprof] profiling the demo for {} s", args.seconds);
    let rec = RecordArgs {
        sample: SampleArgs { event: Some("cpu".into()), ..Default::default() },
        total: false,
        interval: args.interval,
        output: args.output,
        format: None,
        threads: false,
        title: Some("oxprof demo: CPU profile".into()),
        jstackdepth: 2048,
        cstack: None,
        agent_opts: None,
        command: vec![java.display().to_string(), "-cp".into(), dir.display().to_string(), "Demo".into(), args.seconds.to_string()],
    };
    record::run(rec)
}
