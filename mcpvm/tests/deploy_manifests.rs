//! The Kubernetes manifests validate against the API schemas of the
//! oldest and the newest supported Kubernetes, strictly
//! (deploy/kubernetes/validate, which installs `kubernetes-validate`
//! from PyPI on first use), and ask for KVM as clusters grant it.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn validate(files: &[&Path]) -> (Option<i32>, String) {
    let out = Command::new(repo().join("deploy/kubernetes/validate"))
        .args(files)
        .output()
        .expect("run deploy/kubernetes/validate");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_kubernetes_manifests_validate_for_the_oldest_and_newest_versions() {
    let job = repo().join("deploy/kubernetes/audit-job.yaml");
    let (rc, said) = validate(&[&job]);
    assert_eq!(rc, Some(0), "{said}");
    assert!(
        said.contains("Kubernetes 1.35.0: 1 file(s) valid"),
        "{said}"
    );
    assert!(
        said.contains("Kubernetes 1.37.0: 1 file(s) valid"),
        "{said}"
    );

    // A field the API does not know fails, naming it, for each version.
    let text = std::fs::read_to_string(&job).unwrap();
    assert!(text.contains("  parallelism: 8"));
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, text.replace("  parallelism: 8", "  parallelsm: 8")).unwrap();
    let (rc, said) = validate(&[&bad]);
    assert_eq!(rc, Some(1), "{said}");
    assert_eq!(
        said.matches("'parallelsm' was unexpected").count(),
        2,
        "{said}"
    );
}

/// KVM as a device-plugin resource on every pod that boots VMs; no
/// hostPath (a device cgroup refuses it) and no privileged pod.
#[test]
fn every_pod_that_boots_a_vm_asks_for_kvm_as_a_resource() {
    let text = std::fs::read_to_string(repo().join("deploy/kubernetes/audit-job.yaml")).unwrap();
    let docs: Vec<&str> = text.split("\n---\n").collect();
    let boots: Vec<&&str> = docs
        .iter()
        .filter(|d| d.contains("mcpvm audit\n"))
        .collect();
    assert_eq!(boots.len(), 1, "the shards Job");
    for d in boots {
        assert!(d.contains("devices.kubevirt.io/kvm: \"1\""), "{d}");
    }
    let fields: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect();
    assert!(!fields.contains("hostPath"));
    assert!(!fields.contains("privileged: true"));
}
