//! The attach protocol on the other supported HotSpot versions (11, 21, 25),
//! from the runtimes `scripts/test.sh` installs and lists in OXPROF_EXTRA_JDKS.

mod common;

use common::*;
use oxprof_attach::*;

#[test]
#[ignore = "needs OXPROF_EXTRA_JDKS; run by scripts/test.sh"]
fn properties_and_loads_on_every_supported_jdk() {
    let s = Scratch::new("jdks");
    compile_sleeper(&s.0);
    for home in extra_jdks() {
        let java = home.join("bin/java");
        let version = version_of(&java);
        let libs = Scratch::new("jdks-libs");

        let jvm = Jvm::sleeper(&java, &s.0, &[]);
        let (first, second) = properties_twice(&jvm, &s.0);
        eprintln!("{version}: attach latency, inspect to reply: first (SIGQUIT) {first:?}, second {second:?}");
        failed_loads(&jvm, &libs.0);
        agent_return_codes(&jvm, &libs.0);
        listed(&jvm, "Sleeper");
        drop(jvm);

        let jvm = Jvm::sleeper(&java, &s.0, &["-XX:-EnableDynamicAgentLoading"]);
        let agent = build_lib(&libs.0, "testagent");
        match load_agent(&inspect(jvm.pid).unwrap(), &AgentLibrary::Ours(agent), "0", TIMEOUT) {
            Err(e @ AttachError::LoadFailed(_)) => assert!(e.to_string().contains("-XX:+EnableDynamicAgentLoading"), "{version}: {e}"),
            other => panic!("{version}: {other:?}"),
        }
        assert!(alive(jvm.pid), "{version}: the JVM died");
        eprintln!("ok: {version}");
    }
}
