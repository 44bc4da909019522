//! mcpvm's guest agent: PID 1 inside the microVM.
//!
//! Today it brings the guest up (pseudo filesystems), tells the VMM through
//! the boot timer that userspace is running, reports the VM's shape on the
//! console, runs the command given after `--` on the kernel command line,
//! and powers the VM off with that command's exit status (128+N for a
//! signal, as a shell reports it). With no command it powers off with 0.

mod links;
mod ports;
mod root;
mod run;
mod system;
mod vsock;
mod withhold;
mod workspace;

use std::os::unix::process::ExitStatusExt;
use std::process::{Command, ExitStatus};

fn status_byte(status: ExitStatus) -> u8 {
    match (status.code(), status.signal()) {
        (Some(code), _) => code as u8,
        (None, Some(sig)) => 128u8.wrapping_add(sig as u8),
        (None, None) => 255,
    }
}

fn run() -> u8 {
    if let Err(e) = system::mount_pseudo_filesystems() {
        eprintln!("mcpvm-agent: {e}");
        return 1;
    }
    if let Err(e) = ports::signal_boot() {
        eprintln!("mcpvm-agent: cannot reach the boot timer port: {e}");
    }
    println!(
        "mcpvm-agent: up: {} CPUs online, {} MiB memory",
        system::cpus_online().map_or("?".into(), |n| n.to_string()),
        system::memory_mib().map_or("?".into(), |n| n.to_string()),
    );
    // The kernel does not pass dotted parameters to init: read them from
    // /proc.
    let cmdline = std::fs::read_to_string("/proc/cmdline").unwrap_or_default();
    if let Some(spec) = root::from_cmdline(&cmdline) {
        if let Err(e) = root::enter(&spec) {
            eprintln!(
                "mcpvm-agent: cannot use {} as the root filesystem: {e}",
                spec.device
            );
            return 1;
        }
    }
    // `mcpvm.channel=vsock`: the host drives the run over vsock (`mcpvm run`).
    if cmdline
        .split_whitespace()
        .any(|p| p == "mcpvm.channel=vsock")
    {
        return match run::run_over_vsock() {
            Ok(status) => status,
            Err(e) => {
                eprintln!("mcpvm-agent: {e}");
                126
            }
        };
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((program, rest)) = args.split_first() else {
        return 0;
    };
    match Command::new(program)
        .args(rest)
        .env("PATH", "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin")
        .status()
    {
        Ok(status) => {
            println!("mcpvm-agent: {program} exited: {status}");
            status_byte(status)
        }
        Err(e) => {
            eprintln!("mcpvm-agent: cannot run {program}: {e}");
            127
        }
    }
}

fn main() {
    if std::process::id() != 1 {
        eprintln!("mcpvm-agent: this is the guest's PID 1; it runs inside an mcpvm microVM, not on the host");
        std::process::exit(2);
    }
    let status = run();
    // Console writes return once the bytes are in the tty buffer; the UART
    // sends them later, on interrupts. Powering off before that loses the
    // last lines (seen in the boot tests), so wait for the transmitter.
    let _ = std::io::Write::flush(&mut std::io::stdout());
    // SAFETY: tcdrain on our own stdout/stderr fds; fails harmlessly if
    // they are not terminals.
    unsafe {
        libc::tcdrain(1);
        libc::tcdrain(2);
    }
    let err = ports::power_off(status);
    eprintln!("mcpvm-agent: cannot power off: {err}");
    // PID 1 must not exit (the kernel would panic); wait for the VMM.
    loop {
        // SAFETY: pause has no preconditions.
        unsafe { libc::pause() };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_status_maps_like_a_shell() {
        assert_eq!(status_byte(ExitStatus::from_raw(3 << 8)), 3);
        assert_eq!(status_byte(ExitStatus::from_raw(9)), 137);
    }

    #[test]
    fn ports_match_the_vmm_layout() {
        use vmm::arch::x86_64::layout;
        use vmm::devices::boot_timer;
        assert_eq!(ports::BOOT_TIMER_PORT, layout::BOOT_TIMER_PORT);
        assert_eq!(ports::POWER_PORT, layout::POWER_PORT);
        assert_eq!(ports::BOOT_TIMER_MAGIC, boot_timer::BOOT_TIMER_MAGIC);
    }
}
