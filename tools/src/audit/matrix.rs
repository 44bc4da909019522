//! The audit matrix: servers × profiles in a fixed order, and the share
//! of it one shard runs.

use super::verdict::BASELINE;

/// The profiles an audit runs when none are named.
pub const DEFAULT_PROFILES: &[&str] = &[
    "baseline",
    "no-rng",
    "ro-root",
    "no-tmp",
    "tiny-mem",
    "one-cpu",
    "low-fds",
    "no-env",
    "deny-exec",
    "deny-net-sockets",
];

/// The column of `--security`: every tool attacked under the `observe`
/// profile (`mcpvm probe --security`), judged by what the server did.
pub const SECURITY: &str = "security";

/// The column of `--check-proposals`: each server held to the allow-list
/// its logging cell proposed (`profiles/<server>-minimal.toml`), over that
/// cell's profile. It follows the profiles (it needs the logging cell)
/// and comes before the security column.
pub const PROPOSED: &str = "proposed";

/// The columns that keep their place at a server's end, in this order.
const LAST: [&str; 2] = [PROPOSED, SECURITY];

/// One run: a server under a profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cell {
    pub server: String,
    pub profile: String,
}

/// `--shard i/n`: this process runs the cells of the servers whose index
/// is i modulo n (0-based, as Kubernetes' JOB_COMPLETION_INDEX).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

impl Shard {
    pub const ALL: Shard = Shard { index: 0, count: 1 };
}

pub fn parse_shard(s: &str) -> Result<Shard, String> {
    let bad = || format!("'{s}' is not a shard; use I/N with 0 <= I < N, e.g. 0/4");
    let (i, n) = s.split_once('/').ok_or_else(bad)?;
    let (index, count): (usize, usize) =
        (i.parse().map_err(|_| bad())?, n.parse().map_err(|_| bad())?);
    if count == 0 || index >= count {
        return Err(bad());
    }
    Ok(Shard { index, count })
}

/// How [`cells`] orders a matrix and deals it to shards, as `audit.json`
/// and the reports say.
pub const ORDER: &str = "server-major, baseline first, the other profiles rotated by the server's index, the security column last; a server's cells in one shard";

/// The order before [`ORDER`] put `baseline` first: the same cells in
/// each shard (whole servers), so a merge deals them alike.
const ALL_ROTATED: &str = "server-major, the security column last, the other profiles rotated by the server's index; a server's cells in one shard";

/// The order before [`ORDER`]: every profile rotated, cells dealt to the
/// shards one by one. Merges of such audits deal them so.
pub const ROTATED: &str = "server-major, each server's profiles rotated by its index";

/// Every cell, server-major (a server's profiles run close together, so a
/// failing server shows early), then the shard's share: whole servers, so
/// that a server's later cells learn from its first (`super::carry`).
/// `baseline` comes first: every other cell is judged against it, and
/// needs call only the tools that worked there (`super::carry`). The
/// other profiles start one further along for each server: a server's
/// first run after the baseline still pays what is left of its cold
/// caches, and no profile should always be the one that pays them. The
/// security column comes last: it attacks the calls the cells before it
/// showed; the proposed column just before it, after the cell that
/// proposed.
pub fn cells(servers: &[String], profiles: &[String], shard: Shard) -> Vec<Cell> {
    let first: Option<&String> = profiles.iter().find(|p| *p == BASELINE);
    let others: Vec<&String> = profiles
        .iter()
        .filter(|p| !LAST.contains(&p.as_str()) && *p != BASELINE)
        .collect();
    let last: Vec<&String> = LAST
        .iter()
        .filter_map(|l| profiles.iter().find(|p| p == l))
        .collect();
    let n = others.len().max(1);
    servers
        .iter()
        .enumerate()
        .filter(|(i, _)| i % shard.count == shard.index)
        .flat_map(|(i, s)| {
            let rotated: Vec<&String> = (0..others.len()).map(|j| others[(i + j) % n]).collect();
            first
                .into_iter()
                .chain(rotated)
                .chain(last.iter().copied())
                .map(move |p| Cell {
                    server: s.clone(),
                    profile: p.clone(),
                })
        })
        .collect()
}

/// The cells shard `shard` ran in an audit whose `audit.json` says it
/// ran in `order`: audits from before [`ORDER`] dealt cells one by one.
pub fn dealt(order: &str, servers: &[String], profiles: &[String], shard: Shard) -> Vec<Cell> {
    if order == ORDER || order == ALL_ROTATED {
        return cells(servers, profiles, shard);
    }
    let n = profiles.len().max(1);
    let rotate = usize::from(order == ROTATED);
    servers
        .iter()
        .enumerate()
        .flat_map(|(i, s)| {
            (0..profiles.len()).map(move |j| Cell {
                server: s.clone(),
                profile: profiles[(i * rotate + j) % n].clone(),
            })
        })
        .enumerate()
        .filter(|(i, _)| i % shard.count == shard.index)
        .map(|(_, c)| c)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn shards_split_the_matrix_by_server_without_overlap_or_gaps() {
        let (s, p) = (names(&["a", "b", "c"]), names(&["x", "y"]));
        let all = cells(&s, &p, Shard::ALL);
        assert_eq!(all.len(), 6);
        assert_eq!(
            all[1],
            Cell {
                server: "a".into(),
                profile: "y".into()
            }
        );
        // The next server starts with the next profile.
        assert_eq!(all[2].profile, "y");
        assert_eq!(all[4].profile, "x");
        let shards: Vec<Vec<Cell>> = (0..4)
            .map(|i| cells(&s, &p, Shard { index: i, count: 4 }))
            .collect();
        // A server's cells are all in one shard; the fourth has none.
        for (i, shard) in shards.iter().enumerate() {
            assert!(shard.iter().all(|c| c.server == ["a", "b", "c", "-"][i]));
        }
        let mut joined: Vec<Cell> = shards.concat();
        assert_eq!(joined.len(), 6);
        let key = |c: &Cell| (c.server.clone(), c.profile.clone());
        joined.sort_by_key(key);
        let mut all = all;
        all.sort_by_key(key);
        assert_eq!(joined, all);
    }

    #[test]
    fn baseline_is_a_servers_first_run_the_others_rotate_and_security_is_its_last() {
        let (s, p) = (
            names(&["a", "b", "c", "d"]),
            names(&[SECURITY, "x", "baseline", "y"]),
        );
        let all = cells(&s, &p, Shard::ALL);
        assert!(all.chunks(4).all(|c| c[0].profile == "baseline"));
        let seconds: Vec<&str> = all.chunks(4).map(|c| c[1].profile.as_str()).collect();
        assert_eq!(seconds, ["x", "y", "x", "y"]);
        assert!(all.chunks(4).all(|c| c[3].profile == SECURITY));
        // Without a baseline, no profile is always the first.
        let none = cells(&s, &names(&["x", "y", "z"]), Shard::ALL);
        let firsts: Vec<&str> = none.chunks(3).map(|c| c[0].profile.as_str()).collect();
        assert_eq!(firsts, ["x", "y", "z", "x"]);
        // Every cell still runs once.
        for srv in &s {
            let mut got: Vec<&str> = all
                .iter()
                .filter(|c| &c.server == srv)
                .map(|c| c.profile.as_str())
                .collect();
            got.sort();
            assert_eq!(got, ["baseline", "security", "x", "y"]);
        }
    }

    #[test]
    fn the_proposed_column_follows_every_profile_and_precedes_security() {
        let (s, p) = (
            names(&["a", "b", "c"]),
            names(&[SECURITY, "baseline", PROPOSED, "x"]),
        );
        let all = cells(&s, &p, Shard::ALL);
        let firsts: Vec<&str> = all.chunks(4).map(|c| c[0].profile.as_str()).collect();
        assert_eq!(firsts, ["baseline", "baseline", "baseline"]);
        assert!(all
            .chunks(4)
            .all(|c| c[2].profile == PROPOSED && c[3].profile == SECURITY));
        let without = cells(&s, &names(&["baseline", PROPOSED, "x"]), Shard::ALL);
        assert!(without.chunks(3).all(|c| c[2].profile == PROPOSED));
    }

    /// A merge of an audit from before deals its cells as that audit did.
    #[test]
    fn older_audits_are_dealt_cell_by_cell() {
        let (s, p) = (names(&["a", "b"]), names(&["x", "y"]));
        let shard = |index| Shard { index, count: 2 };
        let keys = |v: Vec<Cell>| -> Vec<String> {
            v.into_iter()
                .map(|c| format!("{}/{}", c.server, c.profile))
                .collect()
        };
        assert_eq!(keys(dealt(ROTATED, &s, &p, shard(0))), ["a/x", "b/y"]);
        assert_eq!(keys(dealt(ROTATED, &s, &p, shard(1))), ["a/y", "b/x"]);
        let unrotated = "server-major, profiles in the same order for every server";
        assert_eq!(keys(dealt(unrotated, &s, &p, shard(1))), ["a/y", "b/y"]);
        assert_eq!(keys(dealt(ORDER, &s, &p, shard(1))), ["b/y", "b/x"]);
        // The order before baseline came first dealt the same servers.
        assert_eq!(keys(dealt(ALL_ROTATED, &s, &p, shard(1))), ["b/y", "b/x"]);
    }

    #[test]
    fn shard_syntax_is_checked() {
        assert_eq!(parse_shard("1/3"), Ok(Shard { index: 1, count: 3 }));
        for bad in ["3/3", "1", "a/2", "0/0", "-1/2"] {
            assert!(parse_shard(bad).unwrap_err().contains("use I/N"), "{bad}");
        }
    }
}
