//! The racing writers: conditional writes from many tasks at once, of
//! which exactly one may win a round.

use std::sync::Arc;

use bytes::Bytes;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutOptions};
use tokio::sync::Barrier;

use super::{Attempt, Probes, ROUND_ATTEMPTS, attempt, create, update};
use crate::store::check::judge::{self, RaceRound};
use crate::store::check::{Property, PropertyResult};

impl Probes {
    /// `rounds` races of `writers` conditional PUTs on one fresh key
    /// each: create-only PUTs of a missing key, or compare-and-swap PUTs
    /// that all carry the ETag of the key's one version.
    pub(super) async fn race(&self, property: Property) -> PropertyResult {
        let writers = self.options.writers;
        let mut rounds = Vec::with_capacity(self.options.rounds);
        // A round that proves nothing is run again on a fresh key, up to
        // ROUND_ATTEMPTS times in a row.
        let mut in_a_row = 0;
        for round in 0.. {
            let conclusive = rounds
                .iter()
                .filter(|r| !RaceRound::inconclusive(r))
                .count();
            if conclusive == self.options.rounds || in_a_row == ROUND_ATTEMPTS {
                break;
            }
            let key = self.key(&format!("{}-{round}", crate::store::check::kebab(property)));
            let options = match property {
                Property::AtomicUpdate => match self.store.put(&key, "v0".into()).await {
                    Ok(first) => update(&first),
                    Err(e) => {
                        rounds.push(RaceRound {
                            errors: vec![format!("the first PUT of {key}: {e}")],
                            ..RaceRound::default()
                        });
                        in_a_row += 1;
                        continue;
                    }
                },
                _ => create(),
            };
            let raced = self.race_round(&key, round, options).await;
            in_a_row = if raced.inconclusive() {
                in_a_row + 1
            } else {
                0
            };
            rounds.push(raced);
        }
        judge::race(property, writers, self.options.rounds, &rounds)
    }

    pub(super) async fn race_round(
        &self,
        key: &Path,
        round: usize,
        options: PutOptions,
    ) -> RaceRound {
        let writers = self.options.writers;
        let start = Arc::new(Barrier::new(writers));
        let racers = (0..writers).map(|writer| {
            let (store, key, options, start) = (
                self.store.clone(),
                key.clone(),
                options.clone(),
                start.clone(),
            );
            tokio::spawn(async move {
                let body = Bytes::from(format!("round {round} writer {writer}"));
                start.wait().await;
                let result = store.put_opts(&key, body.clone().into(), options).await;
                (body, attempt(result))
            })
        });
        let mut tally = RaceRound::default();
        let mut winner = None;
        let mut bodies = Vec::with_capacity(writers);
        for racer in futures::future::join_all(racers).await {
            let (body, outcome) = racer.unwrap_or_else(|e| {
                (
                    Bytes::new(),
                    Attempt::Failed(format!("a racing writer panicked: {e}")),
                )
            });
            bodies.push(body.clone());
            match outcome {
                Attempt::Won(_) => {
                    tally.wins += 1;
                    winner = Some(body);
                }
                Attempt::Refused => tally.refused += 1,
                Attempt::Unsupported => tally.unsupported += 1,
                Attempt::Failed(e) => tally.errors.push(e),
            }
        }
        // A key that is not there is an answer; a read that failed is not.
        let kept = match self.read(key).await {
            Ok(kept) => Some(kept),
            Err(object_store::Error::NotFound { .. }) => None,
            Err(e) => {
                tally
                    .errors
                    .push(format!("reading {key} after the race: {e}"));
                None
            }
        };
        tally.winner_kept = winner.is_some() && kept == winner;
        tally.someone_kept = kept.is_some_and(|kept| bodies.contains(&kept));
        tally
    }
}
