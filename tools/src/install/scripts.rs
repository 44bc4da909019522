//! Where `mcpvm image build` runs a layer's install scripts: a microVM
//! booted by this binary on the runtime image, the server's directory as
//! its writable workspace, no network, thrown away after. The host runs
//! no package's code; what comes back passes the workspace's take-back
//! checks (docs/workspace.md) before it becomes the layer.
//!
//! The VM runs through testbed/run (embedded here, like the image
//! scripts): directly on a host whose /dev/kvm boots Linux, inside the
//! nested testbed host where it does not (kvm_pvm), the way the tests do.

use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use mcpvm_images::build::{InstallRecord, ScriptJob, ScriptSandbox};

use mcpvm::host::lines::read_line_bounded;
use mcpvm::logger::printable;

const TESTBED: [(&str, &str); 4] = [
    ("run", include_str!("../../../testbed/run")),
    ("prepare", include_str!("../../../testbed/prepare")),
    ("host-init", include_str!("../../../testbed/host-init")),
    ("case.sh", include_str!("../../../testbed/case.sh")),
];

/// Longest the scripts of one layer (or a crate's build) may take in
/// their VM unless `image build --sandbox-timeout` says otherwise: npm's
/// scripts take seconds, a crate with a hundred dependencies compiles for
/// minutes on hardware and for most of an hour in the nested testbed.
pub const DEFAULT_TIMEOUT_S: u64 = 900;

/// A microVM from this binary and the kernel and initramfs `scripts/build`
/// put beside it (found when a layer first needs them), given `timeout_s`
/// seconds to finish.
pub struct MicroVm {
    pub timeout_s: u64,
}

impl Default for MicroVm {
    fn default() -> Self {
        MicroVm {
            timeout_s: DEFAULT_TIMEOUT_S,
        }
    }
}

struct Artifacts {
    mcpvm: PathBuf,
    kernel: PathBuf,
    initrd: PathBuf,
}

fn artifacts() -> Result<Artifacts, String> {
    use mcpvm::exe::default_artifact;
    let found = |what, rel| default_artifact(what, None, rel).map_err(|e| e.to_string());
    Ok(Artifacts {
        mcpvm: mcpvm::exe::vm().map_err(|e| e.to_string())?,
        kernel: found("kernel", "kernel/vmlinux")?,
        initrd: found("initrd", "initramfs-test.cpio")?,
    })
}

/// The longest line of script output kept, and how many lines.
const MAX_LINE: usize = mcpvm_images::sandbox::MAX_OUTPUT_LINE;
const KEPT_LINES: usize = 400;

/// The last [`KEPT_LINES`] lines of `out` (each cut at [`MAX_LINE`]) and
/// how many came before them.
fn last_lines(out: impl std::io::Read) -> (Vec<String>, usize) {
    let mut reader = BufReader::new(out);
    let mut kept = std::collections::VecDeque::new();
    let (mut line, mut dropped) = (Vec::new(), 0);
    while read_line_bounded(&mut reader, &mut line, MAX_LINE) {
        kept.push_back(String::from_utf8_lossy(&line).into_owned());
        if kept.len() > KEPT_LINES {
            kept.pop_front();
            dropped += 1;
        }
    }
    (kept.into(), dropped)
}

/// Whether `line` of testbed/run's stderr was already shown: nested, the
/// scripts' stderr comes once as it happens (as `testbed: LINE`, kept in
/// `live`, the last [`KEPT_LINES`]) and once more with the scenario's
/// output at the end.
fn shown_live(live: &mut std::collections::VecDeque<String>, line: &str) -> bool {
    if let Some(rest) = line.strip_prefix("testbed: ") {
        live.push_back(rest.to_string());
        if live.len() > KEPT_LINES {
            live.pop_front();
        }
        return false;
    }
    match live.iter().position(|l| l == line) {
        Some(i) => {
            live.remove(i);
            true
        }
        None => false,
    }
}

/// `s` as one single-quoted POSIX shell word.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The testbed's scenario: unpack the stage, run the scripts in a VM
/// with it as the workspace, pack what came back.
fn scenario(job: &ScriptJob<'_>, mem_mib: u64, limit_mib: u64, timeout_s: u64) -> String {
    let env: String = job
        .env
        .iter()
        .map(|(k, v)| format!(" --env {}", quote(&format!("{k}={v}"))))
        .collect();
    let layers: String = (0..job.layers.len())
        .map(|i| format!(" --layer ./layer-{i}.erofs"))
        .collect();
    // Recorded: every file, program and address the scripts touch, as
    // the agent's `effect` events (RECORD_PROFILE), kept also when the
    // scripts fail.
    let record = match job.record {
        true => {
            " --profiles ./record.toml --profile install-scripts --vcpus 1 --events ./events.jsonl"
        }
        false => "",
    };
    // What the scripts print on stderr (cargo's "Compiling ..." lines)
    // goes on as it comes: nested, through the serial log as progress
    // lines, which testbed/run passes on at once; and to the scenario's
    // stderr, which the cause of a failure is taken from.
    format!(
        "set -u\n\
         . ./case.sh\n\
         mkdir stage && tar -xf stage.tar -C stage || exit 90\n\
         rc=0\n\
         mkfifo .stderr\n\
         (while IFS= read -r l; do\n  \
         [ \"${{MCPVM_TESTBED:-}}\" = nested ] && progress \"$l\"\n  \
         printf '%s\\n' \"$l\" >&2\n\
         done < .stderr) &\n\
         ./bin/mcpvm run --kernel ./vmlinux --initrd ./initrd.cpio --image ./runtime.erofs{layers} \\\n  \
         --workspace ./stage,rw --workspace-limit {limit_mib} --mem {mem_mib} --timeout {timeout_s}{env}{record} \\\n  \
         -- /bin/sh -c {} </dev/null 2> .stderr || rc=$?\n\
         wait\n\
         [ -f events.jsonl ] && cp events.jsonl \"$MCPVM_OUT/events.jsonl\"\n\
         if [ $rc -eq 0 ]; then tar -cf \"$MCPVM_OUT/stage.tar\" -C stage . || rc=91; fi\n\
         exit $rc\n",
        quote(&job.shell)
    )
}

/// Bytes under `dir`, not following links.
fn tree_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => tree_bytes(&e.path()),
            Ok(t) if t.is_file() => e.metadata().map(|m| m.len()).unwrap_or(0),
            _ => 0,
        })
        .sum()
}

/// Writes the testbed's scripts into `w` and packs `stage` as the
/// install microVM gets it; the archive's path.
fn stage(w: &Path, stage: &Path) -> Result<PathBuf, String> {
    for (name, text) in TESTBED {
        let path = w.join("testbed").join(name);
        std::fs::create_dir_all(path.parent().unwrap_or(w))
            .and_then(|()| std::fs::write(&path, text))
            .and_then(|()| {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
            })
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    // Symlinks stay symlinks (npm's .bin), as the workspace keeps them.
    let stage_tar = w.join("stage.tar");
    let pack = || -> std::io::Result<()> {
        let mut b = tar::Builder::new(std::fs::File::create(&stage_tar)?);
        b.follow_symlinks(false);
        b.append_dir_all(".", stage)?;
        b.finish()
    };
    pack().map_err(|e| format!("cannot pack {}: {e}", stage.display()))?;
    Ok(stage_tar)
}

/// Shows the install microVM's progress and the scripts' own output as
/// they come, both bounded and printable; the last lines of its stderr.
fn relay(
    child: &mut std::process::Child,
    server: &str,
    progress: &mut dyn FnMut(&str),
) -> Vec<String> {
    // The scripts' own output (the guest's stdout) is read beside the
    // progress lines, so that neither pipe fills; what a script prints
    // is kept bounded, and made printable before it reaches a terminal.
    let stdout = child
        .stdout
        .take()
        .map(|o| std::thread::spawn(move || last_lines(o)));
    let mut said = Vec::new();
    if let Some(err) = child.stderr.take() {
        let mut reader = BufReader::new(err);
        let mut line = Vec::new();
        let mut live = std::collections::VecDeque::new();
        while read_line_bounded(&mut reader, &mut line, MAX_LINE) {
            let text = String::from_utf8_lossy(&line).into_owned();
            if !shown_live(&mut live, &text) {
                progress(&format!("{}: {}", server, printable(&text)));
            }
            said.push(text);
            if said.len() > KEPT_LINES {
                said.remove(0);
            }
        }
    }
    let (printed, dropped) = stdout.and_then(|t| t.join().ok()).unwrap_or_default();
    if dropped > 0 {
        progress(&format!(
            "{}: ({dropped} earlier lines of the scripts' output not shown)",
            server
        ));
    }
    for line in &printed {
        progress(&format!("{}: {}", server, printable(line)));
    }
    said
}

/// Why the install microVM failed: its deadline, or what the guest's npm
/// said (the testbed's own words when it failed itself).
fn failure(status: std::process::ExitStatus, said: &[String], timeout_s: u64) -> String {
    if status.code() == Some(124) {
        return format!(
            "the microVM did not finish in {timeout_s} s (the last lines of its output are above); \
             give it longer with `mcpvm image build --sandbox-timeout SECS`"
        );
    }
    // QEMU warns of every CPU feature TCG lacks on each testbed boot:
    // when the testbed host itself dies (a kernel panic under TCG), those
    // lines would be the cause quoted, and the panic above them lost.
    let said: Vec<&str> = said
        .iter()
        .map(String::as_str)
        .filter(|l| !l.contains("warning: TCG doesn't support requested feature"))
        .collect();
    let npm: Vec<&str> = said
        .iter()
        .copied()
        .filter(|l| !l.starts_with("testbed: "))
        .collect();
    let cause = match mcpvm_images::build::cause(&npm.join("\n")) {
        c if c.is_empty() => mcpvm_images::build::cause(&said.join("\n")),
        c => c,
    };
    format!(
        "exit {}: {cause}",
        status.code().map_or("by signal".into(), |c| c.to_string()),
    )
}

impl MicroVm {
    /// One run of the scenario in `w` through testbed/run, its results
    /// in `out`: how it ended and the last lines of its stderr.
    #[allow(clippy::too_many_arguments)]
    fn boot(
        &self,
        job: &ScriptJob<'_>,
        w: &Path,
        vm: &Artifacts,
        stage_tar: &Path,
        out: &Path,
        guest_mib: u64,
        progress: &mut dyn FnMut(&str),
    ) -> Result<(std::process::ExitStatus, Vec<String>), String> {
        let file = |src: &Path, name: &str| format!("{}:{name}", src.display());
        let layers: Vec<String> = job
            .layers
            .iter()
            .enumerate()
            .map(|(i, l)| file(l, &format!("layer-{i}.erofs")))
            .collect();
        let mut cmd = Command::new("bash");
        // A build that is killed takes its install microVM with it:
        // testbed/run gets SIGTERM and stops its QEMU (seen orphaned).
        // SAFETY: the hook makes only async-signal-safe calls.
        unsafe {
            use std::os::unix::process::CommandExt;
            cmd.pre_exec(probes::transport::wire::die_with_parent(std::process::id()));
        }
        let mut child = cmd
            .arg(w.join("testbed/run"))
            .args(["--timeout", &(self.timeout_s + 120).to_string()])
            .arg("--out")
            .arg(out)
            .args(["--file", &file(&vm.mcpvm, "bin/mcpvm")])
            .args(["--file", &file(&vm.kernel, "vmlinux")])
            .args(["--file", &file(&vm.initrd, "initrd.cpio")])
            .args(["--file", &file(job.runtime, "runtime.erofs")])
            .args(layers.iter().flat_map(|l| ["--file", l.as_str()]))
            .args(["--file", &file(stage_tar, "stage.tar")])
            .args(["--file", &file(&w.join("scripts.sh"), "scripts.sh")])
            .args(["--file", &file(&w.join("record.toml"), "record.toml")])
            .args(["--", "sh", "scripts.sh"])
            .env(
                "MCPVM_TESTBED_MEM",
                (guest_mib + 1536).max(4096).to_string(),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start testbed/run: {e}"))?;
        let said = relay(&mut child, job.server, progress);
        let status = child.wait().map_err(|e| format!("testbed/run: {e}"))?;
        Ok((status, said))
    }
}

/// Whether a failed run's stderr shows a kernel panic: the microVM's,
/// as `mcpvm run` reports it, or the testbed host's own.
fn panicked(said: &[String]) -> bool {
    said.iter()
        .any(|l| l.contains(&vmm_panic_line()) || l.contains("Kernel panic - not syncing"))
}

/// How `mcpvm run` says its guest's kernel panicked.
fn vmm_panic_line() -> String {
    format!("mcpvm: {}", vmm::ExitReason::Panic)
}

impl ScriptSandbox for MicroVm {
    fn run(
        &self,
        job: &ScriptJob<'_>,
        progress: &mut dyn FnMut(&str),
    ) -> Result<Option<InstallRecord>, String> {
        let vm = artifacts()?;
        let work = tempfile::Builder::new()
            // The pid: a build killed before it could clean up has this
            // swept by the next (`mcpvm_images::build::sweep_stale`).
            .prefix(&format!("mcpvm-scripts-{}-", std::process::id()))
            .tempdir()
            .map_err(|e| format!("cannot make a scratch directory: {e}"))?;
        let w = work.path();
        let stage_tar = stage(w, job.stage)?;

        // Room for the tree twice (workspace and npm's work) in the guest.
        let mib = tree_bytes(job.stage) >> 20;
        let mem = job.mem_mib.unwrap_or((512 + 3 * mib).clamp(1024, 3072));
        let limit = (4 * mib).max(1024);
        let payload = std::iter::once(job.runtime)
            .chain(job.layers.iter().map(PathBuf::as_path))
            .map(|f| std::fs::metadata(f).map(|m| m.len() >> 20).unwrap_or(0))
            .sum::<u64>()
            + 2 * mib;
        std::fs::write(
            w.join("scripts.sh"),
            scenario(job, mem, limit, self.timeout_s),
        )
        .map_err(|e| format!("cannot write the scenario: {e}"))?;
        std::fs::write(w.join("record.toml"), super::record::PROFILE)
            .map_err(|e| format!("cannot write the recording profile: {e}"))?;
        // A kernel that panicked (the install microVM's, or the nested
        // testbed host's under emulation) is the machine failing, not the
        // scripts: they run once more, and a second panic is the answer.
        let mut tries = 0;
        let out = loop {
            tries += 1;
            let out = w.join(format!("out-{tries}"));
            let said = self.boot(job, w, &vm, &stage_tar, &out, mem + payload, progress)?;
            let (status, said) = said;
            if status.success() {
                break out;
            }
            let why = failure(status, &said, self.timeout_s);
            if tries > 1 || !panicked(&said) {
                return Err(why);
            }
            progress(&format!(
                "{}: the microVM's kernel panicked ({why}); running the scripts once more",
                job.server
            ));
        };
        // What came back replaces the stage; the take-back in the VM's
        // host already refused links out, special files and modes.
        std::fs::remove_dir_all(job.stage)
            .and_then(|()| std::fs::create_dir_all(job.stage))
            .and_then(|()| {
                let f = std::fs::File::open(out.join("stage.tar"))?;
                tar::Archive::new(f).unpack(job.stage)
            })
            .map_err(|e| format!("cannot put back what the scripts left: {e}"))?;
        if !job.record {
            return Ok(None);
        }
        let record = super::record::read(&out.join("events.jsonl"));
        match &record {
            Some(r) => progress(&format!("{}: {}", job.server, super::record::summary(r))),
            None => progress(&format!(
                "{}: the install scripts' calls were not recorded (no events came back)",
                job.server
            )),
        }
        Ok(record)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A testbed host that died is quoted by its panic, not by QEMU's
    /// warnings about CPU features printed after it.
    #[test]
    fn a_dead_testbed_host_is_quoted_by_its_panic() {
        use std::os::unix::process::ExitStatusExt;
        let mut said: Vec<String> =
            vec!["[  172.649155] Kernel panic - not syncing: Fatal exception in interrupt".into()];
        for bit in 0..12 {
            said.push(format!(
                "qemu-system-x86_64: warning: TCG doesn't support requested feature: CPUID.80000001H:ECX.x [bit {bit}]"
            ));
        }
        let why = failure(std::process::ExitStatus::from_raw(3 << 8), &said, 60);
        assert!(
            why.starts_with("exit 3: ") && why.contains("Kernel panic"),
            "{why}"
        );
        assert!(!why.contains("TCG doesn't support"), "{why}");
    }

    /// A kernel that panicked is run once more; a script that failed is
    /// not (its failure is the answer).
    #[test]
    fn only_a_kernel_panic_is_run_again() {
        let said = |lines: &[&str]| lines.iter().map(|l| l.to_string()).collect::<Vec<_>>();
        assert!(panicked(&said(&[
            "mcpvm: guest kernel panicked (see the serial console)",
            "mcpvm: console: ---[ end Kernel panic - not syncing: Attempted to kill init! ]---",
        ])));
        assert!(panicked(&said(&[
            "testbed: [  172.649155] Kernel panic - not syncing: Fatal exception in interrupt"
        ])));
        assert!(!panicked(&said(&[
            "npm error code 1",
            "npm error command sh -c node install.mjs",
        ])));
    }

    #[test]
    fn what_scripts_print_is_kept_bounded() {
        let mut out = Vec::new();
        for i in 0..1000 {
            out.extend_from_slice(format!("line {i}\n").as_bytes());
        }
        out.extend(std::iter::repeat_n(b'x', 100_000));
        let (kept, dropped) = last_lines(&out[..]);
        assert_eq!((kept.len(), dropped), (KEPT_LINES, 1001 - KEPT_LINES));
        assert_eq!(kept[0], format!("line {}", 1001 - KEPT_LINES));
        assert_eq!(
            kept.last().unwrap().len(),
            MAX_LINE,
            "an endless line is cut"
        );
    }

    #[test]
    fn lines_shown_as_they_came_are_not_shown_again() {
        let mut live = std::collections::VecDeque::new();
        let lines = [
            "testbed: host up after 6s; running the scenario",
            "testbed:    Compiling serde v1.0.0",
            "testbed:    Compiling serde v1.0.0",
            "testbed: scenario exit 0",
            "   Compiling serde v1.0.0",
            "   Compiling serde v1.0.0",
            "   Compiling serde v1.0.0",
            "error: only printed at the end",
        ];
        let shown: Vec<bool> = lines.iter().map(|l| shown_live(&mut live, l)).collect();
        assert_eq!(
            shown,
            [false, false, false, false, true, true, false, false],
            "each live line hides one repeat"
        );
    }

    #[test]
    fn the_scenario_quotes_what_the_catalogue_says() {
        let env = [("K".to_string(), "it's; rm -rf /".to_string())].into();
        let job = ScriptJob {
            server: "s",
            stage: Path::new("/x"),
            runtime: Path::new("/r"),
            layers: vec!["/tools.erofs".into(), "/more.erofs".into()],
            mem_mib: None,
            env: &env,
            shell: "cd /workspace && exec npm rebuild".into(),
            record: true,
        };
        let s = scenario(&job, 1024, 2048, 900);
        assert!(
            s.contains("--image ./runtime.erofs --layer ./layer-0.erofs --layer ./layer-1.erofs"),
            "{s}"
        );
        assert!(s.contains(r"--env 'K=it'\''s; rm -rf /'"), "{s}");
        assert!(
            s.contains("-- /bin/sh -c 'cd /workspace && exec npm rebuild'"),
            "{s}"
        );
        assert!(
            s.contains("--mem 1024")
                && s.contains("--workspace-limit 2048")
                && s.contains("--timeout 900 "),
            "{s}"
        );
        // Its stderr is passed on line by line as it comes.
        assert!(
            s.contains("2> .stderr || rc=$?") && s.contains("progress \"$l\""),
            "{s}"
        );
        // Recorded, and the record comes back also from a failure.
        assert!(
            s.contains("--profile install-scripts --vcpus 1 --events ./events.jsonl")
                && s.contains("cp events.jsonl \"$MCPVM_OUT/events.jsonl\""),
            "{s}"
        );
        // Only a run that succeeded sends its tree back.
        assert!(s.contains("if [ $rc -eq 0 ]; then tar -cf"), "{s}");
    }
}
