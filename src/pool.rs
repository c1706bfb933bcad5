//! The worker pool: scoped threads that share out items, for hashing,
//! linking, verifying, transfers and staging.
//!
//! Two shapes of work use it. A list known in advance ([`map`]: verifying,
//! linking a view, transfers) is shared out through a counter, in order. A
//! queue a producer fills as it goes ([`drain`]: an ingest stages each
//! content the walk finds while the walk goes on) is taken from by threads
//! the producer starts when it first needs them, so that a warm ingest,
//! which stages nothing, starts none.
//!
//! What is not a pool stays out of it: one task run beside another (a spare
//! view claimed while the ingest plans, `store::views`), and the walk's one
//! hashing thread (`source`), which is the walk's own pipeline.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::Mutex;

/// The threads worth starting for `items` with at most `max` at once.
pub fn threads_for(items: usize, max: usize) -> usize {
    max.clamp(1, items.max(1))
}

/// This machine's cores, at most `max`.
pub fn cores(max: usize) -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(max))
}

/// Runs `work` on every item on `threads` scoped threads, each thread with
/// its own state from `init` (a buffer, say), and returns the results in item
/// order. After the first error no further item is started, and that error
/// is returned.
pub fn map<T, S, R, E>(
    items: &[T],
    threads: usize,
    init: impl Fn() -> S + Sync,
    work: impl Fn(&mut S, &T) -> Result<R, E> + Sync,
) -> Result<Vec<R>, E>
where
    T: Sync,
    R: Send,
    E: Send,
{
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let results: Mutex<Vec<Option<R>>> = Mutex::new((0..items.len()).map(|_| None).collect());
    let failure: Mutex<Option<(usize, E)>> = Mutex::new(None);
    std::thread::scope(|scope| {
        for _ in 0..threads_for(items.len(), threads) {
            scope.spawn(|| {
                let mut state = init();
                while !stop.load(Ordering::Relaxed) {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(item) = items.get(i) else { break };
                    match work(&mut state, item) {
                        Ok(r) => {
                            if let Ok(mut all) = results.lock() {
                                all[i] = Some(r);
                            }
                        }
                        Err(e) => {
                            stop.store(true, Ordering::Relaxed);
                            if let Ok(mut f) = failure.lock() {
                                if f.as_ref().is_none_or(|(j, _)| i < *j) {
                                    *f = Some((i, e));
                                }
                            }
                            break;
                        }
                    }
                }
            });
        }
    });
    if let Some((_, e)) = failure.into_inner().ok().flatten() {
        return Err(e);
    }
    Ok(results
        .into_inner()
        .unwrap_or_default()
        .into_iter()
        .flatten()
        .collect())
}

/// One pool thread's share of a queue: takes items from `queue` until every
/// sender is gone, doing `work` on each with the thread's own `state`.
///
/// After the first error (or when `state` could not be made) the thread
/// keeps taking items and drops them, so that the producer never blocks on a
/// full queue; that first error is returned. Otherwise the results come back
/// in the order this thread took them.
pub fn drain<T, S, R, E>(
    queue: &Mutex<Receiver<T>>,
    state: Result<S, E>,
    mut work: impl FnMut(&mut S, T) -> Result<R, E>,
) -> Result<Vec<R>, E> {
    let mut done = Vec::new();
    let (mut state, mut failed) = match state {
        Ok(s) => (Some(s), None),
        Err(e) => (None, Some(e)),
    };
    loop {
        let next = match queue.lock() {
            Ok(rx) => rx.recv(),
            Err(_) => break,
        };
        let Ok(item) = next else { break };
        if let (Some(state), None) = (&mut state, &failed) {
            match work(state, item) {
                Ok(r) => done.push(r),
                Err(e) => failed = Some(e),
            }
        }
    }
    failed.map_or(Ok(done), Err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_come_back_in_order_with_per_thread_state() {
        let items: Vec<u32> = (0..1000).collect();
        let out: Result<Vec<u32>, ()> = map(
            &items,
            4,
            || 0u32,
            |seen, x| {
                *seen += 1;
                Ok(x * 2)
            },
        );
        assert_eq!(
            out.unwrap(),
            items.iter().map(|x| x * 2).collect::<Vec<_>>()
        );
    }

    #[test]
    fn the_first_error_stops_the_work() {
        let items: Vec<u32> = (0..10_000).collect();
        let started = AtomicUsize::new(0);
        let out: Result<Vec<u32>, u32> = map(
            &items,
            3,
            || (),
            |_, x| {
                started.fetch_add(1, Ordering::Relaxed);
                if *x == 10 {
                    Err(*x)
                } else {
                    Ok(*x)
                }
            },
        );
        assert_eq!(out.unwrap_err(), 10);
        assert!(started.into_inner() < 10_000);
    }

    #[test]
    fn no_items_and_more_threads_than_items_are_fine() {
        let none: Result<Vec<u8>, ()> = map(&[] as &[u8], 8, || (), |_, x| Ok(*x));
        assert_eq!(none.unwrap(), Vec::<u8>::new());
        assert_eq!(threads_for(2, 8), 2);
        assert_eq!(threads_for(0, 8), 1);
    }

    #[test]
    fn a_drained_queue_is_emptied_even_after_an_error() {
        let (tx, rx) = std::sync::mpsc::sync_channel::<u32>(1);
        let rx = Mutex::new(rx);
        std::thread::scope(|s| {
            let h = s.spawn(|| {
                drain(
                    &rx,
                    Ok::<_, u32>(()),
                    |_, x| if x == 3 { Err(x) } else { Ok(x) },
                )
            });
            for x in 0..100 {
                tx.send(x).unwrap();
            }
            drop(tx);
            assert_eq!(h.join().unwrap(), Err(3));
        });
    }
}
