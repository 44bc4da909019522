//! What the user can do about an error, in this command line's words.
//! The VMM's errors say what went wrong in its own terms (it knows nothing
//! of mcpvm's flags or the testbed); the advice that names a flag or a
//! script is added here, once, where the error is printed.

use std::error::Error;

use vmm::arch::x86_64::boot_params::BootParamsError;
use vmm::arch::x86_64::layout::{MAX_MEM_MIB, MIN_MEM_MIB};
use vmm::kvm::vm::VmError;
use vmm::kvm::HostError;
use vmm::BootError;

/// Advice for the first error in `e`'s chain that has some.
pub fn for_error(e: &(dyn Error + 'static)) -> Option<String> {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if let Some(hint) = hint(err) {
            return Some(hint);
        }
        cur = err.source();
    }
    None
}

/// Transparent wrappers (`#[error(transparent)]`) pass their inner
/// error's source on, not the inner error itself: look inside them here.
fn hint(e: &(dyn Error + 'static)) -> Option<String> {
    if let Some(crate::run::RunError::Vmm(v)) = e.downcast_ref() {
        return vmm_hint(v);
    }
    if let Some(crate::commands::boot::BootCmdError::Vmm(v)) = e.downcast_ref() {
        return vmm_hint(v);
    }
    if let Some(v) = e.downcast_ref::<vmm::VmmError>() {
        return vmm_hint(v);
    }
    if let Some(b) = e.downcast_ref::<BootError>() {
        return boot_hint(b);
    }
    if let Some(r) = e.downcast_ref::<vmm::restore::RestoreError>() {
        return restore_hint(r);
    }
    if let Some(j) = e.downcast_ref::<vmm::jail::JailError>() {
        return jail_hint(j);
    }
    if let Some(crate::run::RunError::Jail(j)) = e.downcast_ref() {
        return jail_hint(j);
    }
    e.downcast_ref::<HostError>().and_then(host_hint)
}

/// What the seccomp trap report ends with (`vmm::host_seccomp`).
pub const SECCOMP_TRAP: &str =
    "Run with --seccomp log to see every such call (kernel log), and report it.";

fn jail_hint(e: &vmm::jail::JailError) -> Option<String> {
    use vmm::jail::JailError;
    match e {
        JailError::Unavailable(_) | JailError::Setup { .. } => {
            Some("pass --jail off to run unjailed (docs/security.md, \"The jail\")".into())
        }
        JailError::Missing { .. } => None,
    }
}

fn restore_hint(e: &vmm::restore::RestoreError) -> Option<String> {
    use vmm::restore::RestoreError;
    match e {
        RestoreError::WritableDisk { .. } | RestoreError::DisksDiffer { .. } => {
            Some("name every disk of the snapshot, in order, with --disk PATH[,rw]".into())
        }
        _ => None,
    }
}

fn host_hint(e: &HostError) -> Option<String> {
    match e {
        HostError::NoKvm => {
            Some("or run the Linux-booting work in the testbed (testbed/run)".into())
        }
        HostError::Pvm => Some(
            "or run inside the testbed: testbed/run SCENARIO. Pass --allow-pvm to try anyway"
                .into(),
        ),
        _ => None,
    }
}

fn vmm_hint(e: &vmm::VmmError) -> Option<String> {
    match e {
        vmm::VmmError::Boot(b) => boot_hint(b),
        _ => None,
    }
}

fn boot_hint(e: &BootError) -> Option<String> {
    match e {
        BootError::MemorySize(_) => {
            Some(format!("use --mem between {MIN_MEM_MIB} and {MAX_MEM_MIB}"))
        }
        BootError::VcpuCount(_) => Some(format!(
            "use --vcpus between 1 and {}",
            vmm::arch::x86_64::mptable::MAX_CPUS
        )),
        BootError::LoadKernel { .. } => Some("or give the VM more memory (--mem)".into()),
        BootError::Host(h) => host_hint(h),
        BootError::Restore(r) => restore_hint(r),
        BootError::Vm(VmError::Memory { .. }) => Some("lower --mem".into()),
        BootError::BootParams(BootParamsError::InitrdTooLarge { .. }) => Some("raise --mem".into()),
        _ => None,
    }
}

/// `error` as one line: the chain, then what to do.
pub fn explain(e: &(dyn Error + 'static)) -> String {
    let chain = crate::error_chain(e);
    match for_error(e) {
        Some(h) => format!("{chain}; {h}"),
        None => chain,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_vmm_says_what_and_the_cli_says_which_flag() {
        let e: Box<dyn Error> = Box::new(crate::run::RunError::from(vmm::VmmError::from(
            BootError::MemorySize(4),
        )));
        let text = explain(e.as_ref());
        assert!(text.contains("4 MiB is out of range"), "{text}");
        assert!(text.ends_with("use --mem between 16 and 65536"), "{text}");
        let e = vmm::VmmError::from(BootError::from(HostError::Pvm));
        assert!(explain(&e).contains("testbed/run"));
        let plain = vmm::VmmError::from(BootError::TooManyDevices(99));
        assert_eq!(explain(&plain), crate::error_chain(&plain));
        // The jail's errors say what the host refused; the flag is ours.
        let refused = crate::run::RunError::Jail(vmm::jail::JailError::Unavailable(
            std::io::Error::from_raw_os_error(libc::EPERM),
        ));
        let text = explain(&refused);
        assert!(
            text.contains("The host refuses a jail here") && text.ends_with("\"The jail\")"),
            "{text}"
        );
        assert!(text.contains("pass --jail off"), "{text}");
    }

    /// `vmm` knows nothing of mcpvm: no error message it defines names a
    /// command-line flag or the mcpvm command (the advice is added here).
    #[test]
    fn no_vmm_error_names_an_mcpvm_flag() {
        fn rs_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
            for e in std::fs::read_dir(dir).unwrap().flatten() {
                let p = e.path();
                if p.is_dir() {
                    rs_files(&p, out);
                } else if p.extension().is_some_and(|x| x == "rs") {
                    out.push(p);
                }
            }
        }
        let mut files = Vec::new();
        rs_files(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../vmm/src"),
            &mut files,
        );
        assert!(files.len() > 20, "the vmm sources are found");
        let flag = |l: &str| {
            l.match_indices("--")
                .any(|(i, _)| l[i + 2..].starts_with(|c: char| c.is_ascii_lowercase()))
        };
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap();
            // Inside an `#[error(…)]` that spans lines.
            let mut open = false;
            for (n, line) in text.lines().enumerate() {
                let starts = line.trim_start().starts_with("#[error(");
                let judged = starts || open || line.contains("msg.push(");
                open = (starts || open) && !line.contains(")]");
                if judged {
                    assert!(
                        !flag(line) && !line.contains("mcpvm run") && !line.contains("mcpvm boot"),
                        "{}:{}: {line}",
                        f.display(),
                        n + 1
                    );
                }
            }
        }
    }
}
