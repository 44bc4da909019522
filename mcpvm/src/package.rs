//! `--package npm:NAME@VERSION` / `pypi:NAME==VERSION`: a server named by
//! its package, like `npx`/`uvx` but pinned and sandboxed. Its layer is
//! built into the image store on first use (its install scripts in a
//! microVM, as for any layer) and found there after; the command is the
//! package's own executable, which the store remembers.

use std::collections::BTreeMap;
use std::path::PathBuf;

use mcpvm_images::build::build;
use mcpvm_images::catalogue::Catalogue;
use mcpvm_images::store::{self, Index};

use crate::server::ServerPlan;

/// The server `spec` names, its layer built first if the store has none.
pub fn plan(
    spec: &str,
    images: &Option<PathBuf>,
) -> Result<ServerPlan, Box<dyn std::error::Error>> {
    let (name, mut entry) = mcpvm_images::package::entry(spec)?;
    let dir = images.clone().unwrap_or_else(store::default_dir);
    let built = |entry: &mcpvm_images::catalogue::Entry| {
        let index = Index::load(&dir).ok()?;
        let key = index.key_of(&name, entry);
        index.resolve(&dir, &name, &key).ok()?;
        index.servers.get(&name)?.command.clone()
    };
    let command = match built(&entry) {
        Some(command) => command,
        None => {
            eprintln!(
                "package: {spec}: building its layer in {} (first use; cached after)",
                dir.display()
            );
            let catalogue = Catalogue {
                source: format!("--package {spec}"),
                servers: BTreeMap::from([(name.clone(), entry.clone())]),
            };
            let sandbox = crate::install_scripts::MicroVm::default();
            let report = build(
                &catalogue,
                std::slice::from_ref(&name),
                &[],
                &dir,
                &sandbox,
                &mut |msg| eprintln!("image: {msg}"),
            )?;
            if let Some(f) = report.failed.first() {
                return Err(format!("--package {spec}: {}", f.error).into());
            }
            built(&entry).ok_or_else(|| {
                format!(
                    "--package {spec}: its layer was built but is not in {}",
                    dir.display()
                )
            })?
        }
    };
    // The layer's key is of the entry as given (no command); the guest
    // runs the command the build found.
    let mut plan = crate::server::plan_entry(&name, &entry, &dir)?;
    entry.command = command;
    plan.argv = entry.argv(&name);
    Ok(plan)
}
