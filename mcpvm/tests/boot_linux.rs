//! Boots our guest kernel on our VMM on real KVM (directly, or inside the
//! testbed where /dev/kvm is kvm_pvm) and checks what the guest and the
//! VMM report. One testbed session runs every case (scenarios/boot.sh);
//! each test asserts on its own case.

mod common;

use std::sync::OnceLock;

use common::{artifact, run_scenario_within, tiny_elf, Case, Results};

fn results() -> &'static Results {
    static R: OnceLock<Results> = OnceLock::new();
    R.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let elf = dir.path().join("triple-fault.elf");
        std::fs::write(&elf, tiny_elf(&[0x0f, 0x0b], 0x10_0000)).unwrap(); // ud2, no IDT
        let files = vec![
            format!("{}:bin/mcpvm", artifact("bin/mcpvm").display()),
            format!("{}:bin/vsock-load", artifact("bin/vsock-load").display()),
            format!("{}:vmlinux", artifact("kernel/vmlinux").display()),
            format!("{}:bzImage", artifact("kernel/bzImage").display()),
            format!(
                "{}:initramfs.cpio",
                artifact("initramfs-test.cpio").display()
            ),
            format!("{}:triple-fault.elf", elf.display()),
            format!("{}:root.ext4", ext4_image(dir.path()).display()),
            format!(
                "{}:vsock-flood.sh",
                common::workspace()
                    .join("mcpvm/tests/scenarios/vsock-flood.sh")
                    .display()
            ),
        ];
        let scenario = common::workspace().join("mcpvm/tests/scenarios/boot.sh");
        // About 3 min alone, the vsock flood half of it; room for a
        // machine shared with other testbeds.
        run_scenario_within(&scenario, &files, 1200)
    })
}

/// A 4 MiB ext4 image holding hello.txt, made without mounting anything.
fn ext4_image(dir: &std::path::Path) -> std::path::PathBuf {
    let content = dir.join("content");
    std::fs::create_dir_all(&content).unwrap();
    std::fs::write(content.join("hello.txt"), "hello from a virtio-blk disk\n").unwrap();
    let img = dir.join("root.ext4");
    let out = std::process::Command::new("mkfs.ext4")
        .args(["-q", "-F", "-d"])
        .arg(&content)
        .arg(&img)
        .arg("4M")
        .output()
        .expect("mkfs.ext4 (e2fsprogs) runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    img
}

fn case(name: &str) -> &'static Case {
    results().case(name)
}

fn assert_timeline(c: &Case) {
    let (ready, entry, boot, exit) = (
        c.ms("kvm_ready").unwrap(),
        c.ms("kernel_entry").unwrap(),
        c.ms("boot_timer").unwrap(),
        c.ms("exit").unwrap(),
    );
    assert!(
        0.0 < ready && ready <= entry && entry < boot && boot <= exit,
        "{:?}",
        c.json()
    );
}

#[test]
fn pvh_boot_reaches_init_and_powers_off_cleanly() {
    let c = case("pvh");
    assert_eq!(c.rc, 0, "{c:?}");
    assert!(c.stdout.contains("Linux version 6.12"), "{}", c.stdout);
    assert!(
        c.stdout.contains("mcpvm-agent: up: 1 CPUs online"),
        "{}",
        c.stdout
    );
    assert_eq!(c.json()["exit"]["reason"], "poweroff");
    assert_timeline(c);
}

#[test]
fn bzimage_boots_with_two_vcpus() {
    let c = case("bzimage_smp");
    assert_eq!(c.rc, 0, "{c:?}");
    assert!(
        c.stdout.contains("mcpvm-agent: up: 2 CPUs online"),
        "{}",
        c.stdout
    );
    assert!(
        !c.stdout.contains("Linux version"),
        "quiet should silence the kernel: {}",
        c.stdout
    );
    assert_timeline(c);
}

#[test]
fn guest_command_status_becomes_the_vmm_exit_code() {
    let c = case("status");
    assert_eq!(c.rc, 3, "{c:?}");
    assert!(
        c.stdout.contains("mcpvm-agent: up: 4 CPUs online"),
        "{}",
        c.stdout
    );
    assert!(c.stdout.contains("from-guest-shell"), "{}", c.stdout);
    assert_eq!(c.json()["exit"]["code"], 3);
}

#[test]
fn hung_guest_ends_at_the_timeout_with_124() {
    let c = case("timeout");
    assert_eq!(c.rc, 124, "{c:?}");
    assert_eq!(c.json()["exit"]["reason"], "timeout");
    let exit = c.ms("exit").unwrap();
    assert!((3000.0..10_000.0).contains(&exit), "exit at {exit} ms");
}

#[test]
fn kernel_panic_is_reported_with_125() {
    let c = case("panic");
    assert_eq!(c.rc, 125, "{c:?}");
    assert_eq!(c.json()["exit"]["reason"], "panic");
    assert!(c.stdout.contains("Kernel panic"), "{}", c.stdout);
}

#[test]
fn triple_fault_is_reported_with_125() {
    let c = case("triple_fault");
    assert_eq!(c.rc, 125, "{c:?}");
    assert_eq!(c.json()["exit"]["reason"], "crash");
    assert!(
        c.json()["exit"]["detail"]
            .as_str()
            .unwrap()
            .contains("triple-fault"),
        "{:?}",
        c.json()
    );
}

#[test]
fn sigterm_stops_the_vm_with_143() {
    let c = case("sigterm");
    assert_eq!(c.rc, 143, "{c:?}");
    assert_eq!(c.json()["exit"]["reason"], "signal");
}

/// A guest paused by SIGUSR1 and restored three times at once (see
/// boot.sh): every restored VM counts on from exactly where the snapshot
/// paused it, to the guest's own exit status; the snapshot stays as it was.
#[test]
fn a_snapshot_restores_into_vms_that_go_on_where_it_paused() {
    let c = case("snapshot");
    assert_eq!(c.rc, 0, "{c:?}");
    let file = |name: &str| {
        results()
            .files
            .get(name)
            .unwrap_or_else(|| panic!("{name} missing"))
            .clone()
    };
    let source: serde_json::Value = serde_json::from_str(file("snap_source.json").trim()).unwrap();
    assert_eq!(source["exit"]["reason"], "snapshot", "{source}");
    assert_eq!(file("snap_source.code").trim(), "0");
    let source_log = file("snap_source.log");
    for n in 1..=3 {
        let restored = file(&format!("snap_restored{n}.log"));
        assert_eq!(
            file(&format!("snap_restored{n}.code")).trim(),
            "7",
            "restored VM {n}: {}\n{restored}",
            file(&format!("snap_restored{n}.json"))
        );
        // The console before the pause and after the restore is one run:
        // every tick once, in order (a line may be split at the pause).
        let ticks: Vec<String> = format!("{source_log}{restored}")
            .lines()
            .filter(|l| l.starts_with("tick-"))
            .map(str::to_string)
            .collect();
        let expected: Vec<String> = (0..40).map(|i| format!("tick-{i}")).collect();
        assert_eq!(ticks, expected, "restored VM {n}:\n{restored}");
        assert!(!restored.contains("tick-0\n"), "it did not boot again");
    }
    assert_eq!(
        file("snap_mtime_before.txt"),
        file("snap_mtime_after.txt"),
        "restored VMs write to their own copy of memory"
    );
    assert_eq!(file("snap_bad.code").trim(), "1");
    let bad = file("snap_bad_stderr.txt");
    assert!(bad.contains("does not match its checksum"), "{bad}");
    assert_eq!(bad.trim().lines().count(), 1, "{bad}");
}

#[test]
fn serial_off_still_boots_and_prints_nothing_from_the_guest() {
    let c = case("serial_off");
    assert_eq!(c.rc, 0, "{c:?}");
    assert_eq!(
        c.stdout.lines().count(),
        1,
        "only the JSON line: {}",
        c.stdout
    );
    assert_timeline(c);
}

#[test]
fn serial_file_receives_the_console() {
    let c = case("serial_file");
    assert_eq!(c.rc, 0, "{c:?}");
    let log = results()
        .files
        .get("serial_file.log")
        .expect("serial log brought back");
    assert!(log.contains("mcpvm-agent: up"), "{log}");
    assert!(!c.stdout.contains("mcpvm-agent"), "{}", c.stdout);
}

#[test]
fn sixty_four_concurrent_guest_vsock_streams_echo_intact() {
    let c = case("vsock64");
    assert_eq!(c.rc, 0, "{c:?}");
    assert!(c.stdout.contains("vsock-load: ok"), "{}", c.stdout);
    assert!(
        results()
            .files
            .get("vsock_socket_left.txt")
            .is_none_or(|s| s.trim().is_empty()),
        "the VMM removes its socket"
    );
}

/// A hostile guest floods vsock (see boot.sh): every connection gets an
/// answer, the VM goes on and ends normally, the VMM's memory stays bounded
/// (256 MiB of guest memory plus well under 128 MiB of its own).
#[test]
fn a_guest_flooding_vsock_breaks_only_itself() {
    let c = case("vsock_flood");
    assert_eq!(c.rc, 0, "{c:?}");
    for port_line in ["flood: 3000 tried", "flood-survived"] {
        assert!(c.stdout.contains(port_line), "{}", c.stdout);
    }
    let lines: Vec<&str> = c
        .stdout
        .lines()
        .filter(|l| l.contains("vsock-load: flood:"))
        .collect();
    assert_eq!(lines.len(), 3, "every flood finished: {}", c.stdout);
    assert!(
        lines[1].contains(" 0 connected"),
        "nobody listens on 6001: {}",
        lines[1]
    );
    // Every stream was answered: connected or refused.
    let count = |line: &str, what: &str| -> usize {
        line.split(", ")
            .find_map(|p| p.strip_suffix(what))
            .and_then(|n| n.trim().rsplit(' ').next()?.parse().ok())
            .unwrap_or_else(|| panic!("no '{what}' in {line}"))
    };
    for (line, tried) in lines.iter().zip([3000, 3000, 1500]) {
        assert_eq!(
            count(line, " connected") + count(line, " refused"),
            tried,
            "{line}"
        );
    }
    // The third: an accepting host. Streams beyond the VMM's limit, or
    // beyond what the host program's backlog holds while it is busy
    // accepting, are reset rather than waited for.
    let connected = count(lines[2], " connected");
    assert!((1..=1024).contains(&connected), "{}", lines[2]);
    let peak_kb: u64 = results()
        .files
        .get("vsock_flood_peak_kb.txt")
        .and_then(|s| s.trim().parse().ok())
        .expect("peak RSS sampled");
    assert!(
        peak_kb > 0 && peak_kb < (256 + 128) * 1024,
        "VMM peak RSS {peak_kb} kB"
    );
}

#[test]
fn a_read_only_disk_is_readable_and_refuses_every_write() {
    let c = case("disk_read");
    assert_eq!(c.rc, 0, "{c:?}");
    assert!(
        c.stdout.contains("hello from a virtio-blk disk"),
        "{}",
        c.stdout
    );
    // The kernel saw VIRTIO_BLK_F_RO and the id from GET_ID.
    assert!(c.stdout.contains("ro=1 serial=mcpvm-root"), "{}", c.stdout);
    assert!(c.stdout.contains("raw-write-refused"), "{}", c.stdout);
    assert!(c.stdout.contains("fs-write-refused"), "{}", c.stdout);
    let (before, after) = (
        results().file("root_before.sha"),
        results().file("root_after.sha"),
    );
    assert_eq!(before, after, "the read-only image changed");
}

#[test]
fn guest_writes_land_in_writable_images_in_both_cache_modes() {
    let c = case("disk_rw");
    assert_eq!(c.rc, 0, "{c:?}");
    assert!(!c.stdout.contains("write-failed"), "{}", c.stdout);
    // vda read-only, vdb and vdc writable; 1 MiB = 2048 sectors.
    let lines: Vec<&str> = c.stdout.lines().map(str::trim).collect();
    assert!(
        lines.windows(4).any(|w| w == ["1", "0", "0", "2048"]),
        "{}",
        c.stdout
    );
    assert_eq!(results().file("scratch_marker.txt"), "mcpvm-marker-vdb");
    assert_eq!(results().file("direct_marker.txt"), "mcpvm-marker-vdc");
}

#[test]
fn a_missing_disk_image_is_one_clear_error() {
    let c = case("disk_missing");
    assert_eq!(c.rc, 1, "{c:?}");
    assert!(
        c.stderr.contains("Cannot open disk image /nonexistent.img"),
        "{}",
        c.stderr
    );
    assert_eq!(c.stderr.trim().lines().count(), 1, "{}", c.stderr);
}
