//! `mcpvm image build`: the runtime image and a layer per catalogued
//! server, into the image store (content-addressed, cached).

use std::path::PathBuf;

use clap::{Args, Subcommand};
use mcpvm_images::build::build;
use mcpvm_images::catalogue::Catalogue;
use mcpvm_images::store;

#[derive(Subcommand)]
pub enum ImageCommand {
    /// Build (or find cached) the runtime image and server layers.
    Build(BuildArgs),
}

#[derive(Args)]
pub struct BuildArgs {
    /// Server catalogue (TOML); default: the built-in one.
    #[arg(long)]
    catalogue: Option<PathBuf>,
    /// Only these servers (comma-separated); default: every one.
    #[arg(long, value_delimiter = ',')]
    servers: Vec<String>,
    /// The image store [default: ~/.cache/mcpvm/images].
    #[arg(long)]
    images: Option<PathBuf>,
}

pub fn load_catalogue(path: &Option<PathBuf>) -> Result<Catalogue, Box<dyn std::error::Error>> {
    Ok(match path {
        Some(p) => Catalogue::load(p)?,
        None => Catalogue::built_in(),
    })
}

pub fn run(cmd: ImageCommand, json: bool) -> Result<u8, Box<dyn std::error::Error>> {
    match cmd {
        ImageCommand::Build(a) => {
            let catalogue = load_catalogue(&a.catalogue)?;
            let dir = a.images.unwrap_or_else(store::default_dir);
            let report = build(&catalogue, &a.servers, &dir, &mut |msg| {
                eprintln!("image: {msg}")
            })?;
            if json {
                println!("{}", serde_json::to_string(&report)?);
            } else {
                let mb = |b: u64| b as f64 / 1e6;
                println!(
                    "runtime  {:>8.1} MB  {}",
                    mb(report.runtime.bytes),
                    if report.runtime.cached {
                        "cached"
                    } else {
                        "built"
                    }
                );
                for s in &report.servers {
                    println!(
                        "{:<20} {:>8.1} MB  {} in {:.1} s",
                        s.name,
                        mb(s.bytes),
                        if s.cached { "cached" } else { "built" },
                        s.seconds
                    );
                }
                println!("store {} ({:.1} s)", report.store.display(), report.seconds);
            }
            Ok(0)
        }
    }
}
