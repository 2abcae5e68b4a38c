//! `oxprof demo`: compiles the bundled demo program with `javac` and profiles
//! it, so a newcomer sees a flame graph with one command.

use std::path::PathBuf;
use std::process::{Command, ExitCode};

use clap::Args;

use crate::agent;
use crate::agent_opts::SampleArgs;
use crate::record::{self, RecordArgs, TempFiles};

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
    // A private directory (javac writes Demo.class there, java reads it),
    // removed when the demo is done.
    let tmp = TempFiles::named("oxprof-demo").map_err(|e| format!("cannot create a temporary directory in {}: {e}", std::env::temp_dir().display()))?;
    let dir = tmp.dir.clone();
    let src = tmp.create("Demo.java", DEMO_SOURCE.as_bytes()).map_err(|e| format!("cannot write Demo.java in {}: {e}", dir.display()))?;
    eprintln!("[oxprof] compiling the demo with {}", javac.display());
    let st = Command::new(&javac).arg("-d").arg(&dir).arg(&src).status().map_err(|e| format!("cannot run javac: {e}"))?;
    if !st.success() {
        return Err(format!("javac failed on {}", src.display()));
    }
    eprintln!("[oxprof] profiling the demo for {} s", args.seconds);
    let rec = RecordArgs {
        sample: SampleArgs { event: Some("cpu".into()), ..Default::default() },
        total: false,
        interval: Some(args.interval),
        output: args.output,
        format: None,
        threads: false,
        title: Some("oxprof demo: CPU profile".into()),
        jstackdepth: 2048,
        cstack: None,
        agent_opts: None,
        command: vec![java.display().to_string(), "-cp".into(), dir.display().to_string(), "Demo".into(), args.seconds.to_string()],
    };
    let result = record::run(rec);
    drop(tmp);
    result
}
