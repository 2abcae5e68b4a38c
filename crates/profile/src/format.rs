//! Output format selection: from an explicit word or from a file's extension.

use std::fmt;
use std::path::Path;

/// The formats a profile can be written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputFormat {
    /// `frame;frame;frame count` lines, root first.
    Collapsed,
    /// A self-contained interactive HTML flame graph.
    FlameGraph,
    /// Gzipped pprof `profile.proto` (Go's pprof, Pyroscope, Grafana).
    Pprof,
    /// A JDK Flight Recorder file, streamed while recording.
    Jfr,
    /// An OpenTelemetry `ExportProfilesServiceRequest` (uncompressed
    /// protobuf), the body an OTLP/HTTP sender gzips and POSTs.
    Otlp,
}

impl OutputFormat {
    /// The explicit words accepted on the command line / in agent options.
    pub const WORDS: &'static str = "collapsed, flamegraph, pprof, jfr, otlp";

    /// Parses an explicit format word.
    pub fn from_word(word: &str) -> Option<OutputFormat> {
        match word {
            "collapsed" | "folded" => Some(OutputFormat::Collapsed),
            "flamegraph" | "html" => Some(OutputFormat::FlameGraph),
            "pprof" => Some(OutputFormat::Pprof),
            "jfr" => Some(OutputFormat::Jfr),
            "otlp" => Some(OutputFormat::Otlp),
            _ => None,
        }
    }

    /// Picks a format from the file name's extension, if it names one.
    pub fn from_path(path: &Path) -> Option<OutputFormat> {
        let name = path.file_name()?.to_str()?.to_ascii_lowercase();
        if name.ends_with(".html") || name.ends_with(".htm") {
            Some(OutputFormat::FlameGraph)
        } else if name.ends_with(".collapsed") || name.ends_with(".txt") || name.ends_with(".folded") {
            Some(OutputFormat::Collapsed)
        } else if name.ends_with(".otlp.pb") || name.ends_with(".otlp") {
            Some(OutputFormat::Otlp)
        } else if name.ends_with(".pb.gz") || name.ends_with(".pprof") || name.ends_with(".pb") {
            Some(OutputFormat::Pprof)
        } else if name.ends_with(".jfr") {
            Some(OutputFormat::Jfr)
        } else {
            None
        }
    }

    /// The usual file extension, used for fallback file names.
    pub fn extension(self) -> &'static str {
        match self {
            OutputFormat::Collapsed => "collapsed",
            OutputFormat::FlameGraph => "html",
            OutputFormat::Pprof => "pb.gz",
            OutputFormat::Jfr => "jfr",
            OutputFormat::Otlp => "otlp.pb",
        }
    }
}

impl fmt::Display for OutputFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            OutputFormat::Collapsed => "collapsed",
            OutputFormat::FlameGraph => "flamegraph",
            OutputFormat::Pprof => "pprof",
            OutputFormat::Jfr => "jfr",
            OutputFormat::Otlp => "otlp",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extension_and_words() {
        assert_eq!(OutputFormat::from_path(Path::new("x/p.html")), Some(OutputFormat::FlameGraph));
        assert_eq!(OutputFormat::from_path(Path::new("p.TXT")), Some(OutputFormat::Collapsed));
        assert_eq!(OutputFormat::from_path(Path::new("p.collapsed")), Some(OutputFormat::Collapsed));
        assert_eq!(OutputFormat::from_path(Path::new("p.bin")), None);
        assert_eq!(OutputFormat::from_word("flamegraph"), Some(OutputFormat::FlameGraph));
        assert_eq!(OutputFormat::from_word("nope"), None);
        assert_eq!(OutputFormat::from_path(Path::new("cpu.pb.gz")), Some(OutputFormat::Pprof));
        assert_eq!(OutputFormat::from_path(Path::new("cpu.pprof")), Some(OutputFormat::Pprof));
        assert_eq!(OutputFormat::from_word("pprof"), Some(OutputFormat::Pprof));
        assert_eq!(OutputFormat::from_path(Path::new("rec.JFR")), Some(OutputFormat::Jfr));
        assert_eq!(OutputFormat::from_word("jfr"), Some(OutputFormat::Jfr));
        assert_eq!(OutputFormat::from_path(Path::new("x.otlp.pb")), Some(OutputFormat::Otlp));
        assert_eq!(OutputFormat::from_path(Path::new("x.OTLP")), Some(OutputFormat::Otlp));
        assert_eq!(OutputFormat::from_path(Path::new("x.pb")), Some(OutputFormat::Pprof));
        assert_eq!(OutputFormat::from_word("otlp"), Some(OutputFormat::Otlp));
        assert_eq!(OutputFormat::Otlp.to_string(), "otlp");
    }
}
