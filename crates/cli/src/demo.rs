//! `oxprof demo`: compiles the bundled demo program with `javac` and profiles
//! it, so a newcomer sees a flame graph with one command.

use std::path::PathBuf;
use std::process::{Command, ExitCode};

use clap::Args;

use crate::agent;
use crate::agent_opts::{absolute, check_interval, check_output_dir, check_output_name, parse_interval, SampleArgs};
use crate::record::{self, RecordArgs, TempFiles};

const DEMO_SOURCE: &str = include_str!("../../../demo/Demo.java");

#[derive(Args, Debug)]
#[command(about = "Compile and profile the bundled demo Java program", after_help = "Example:\n  oxprof demo -o demo.html && xdg-open demo.html")]
pub struct DemoArgs {
    /// Output file (.html flame graph or .collapsed stacks)
    #[arg(short, long, default_value = "demo.html")]
    pub output: PathBuf,
    /// How long the demo runs, in seconds
    #[arg(long, default_value_t = 5.0, value_parser = parse_seconds)]
    pub seconds: f64,
    /// Sampling interval of CPU time, at least 100us
    #[arg(short, long, default_value = "10ms", value_parser = parse_demo_interval)]
    pub interval: String,
}

/// clap parser for the demo's `--interval`: a CPU sampling interval.
fn parse_demo_interval(s: &str) -> Result<String, String> {
    let s = parse_interval(s)?;
    check_interval(Some(&s), None).map_err(|e| e.strip_prefix(&format!("--interval {s}: ")).unwrap_or(&e).to_string())?;
    Ok(s)
}

/// clap parser for `--seconds`: a positive, finite number.
fn parse_seconds(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v <= 86_400.0 => Ok(v),
        _ => Err(format!("'{s}' is not a number of seconds between 0 and 86400 (e.g. 5 or 2.5)")),
    }
}

pub fn run(args: DemoArgs) -> Result<ExitCode, String> {
    // What record would refuse, before compiling the demo.
    check_output_name(&args.output, None, None)?;
    check_output_dir(&absolute(&args.output))?;
    let javac = agent::jdk_tool("javac")?;
    let java = agent::jdk_tool("java")?;
    // A private directory (javac writes Demo.class there, java reads it),
    // removed when the demo is done.
    let tmp = TempFiles::named("oxprof-demo").map_err(|e| format!("cannot create a temporary directory in {}: {e}", std::env::temp_dir().display()))?;
    let dir = tmp.dir.clone();
    let src = tmp.create("Demo.java", DEMO_SOURCE.as_bytes()).map_err(|e| format!("cannot write Demo.java in {}: {e}", dir.display()))?;
    errln!("[oxprof] compiling the demo with {}", javac.display());
    let st = Command::new(&javac).arg("-d").arg(&dir).arg(&src).status().map_err(|e| format!("cannot run javac: {e}"))?;
    if !st.success() {
        return Err(format!("javac failed on {}", src.display()));
    }
    errln!("[oxprof] profiling the demo for {} s", args.seconds);
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
