//! The pass context (Cranelift's `Context`, NAK's `pass!`): it owns the function and its cached
//! analyses, runs passes, drops the analyses a pass says it invalidated, and after every pass
//! prints, verifies and times it as `KILN_DEBUG` asks. `docs/passes.md` says how to add a pass.
//!
//! `KILN_DEBUG` is a comma-separated list, read once per process ([`DebugFlags::from_env`];
//! the README's table lists the words).

use crate::divergence::Divergence;
use crate::liveness::{Liveness, compute_liveness};
use kiln_ir::cfg::StructureError;
use kiln_ir::{Cfg, DomTree, Function, VerifyError, print_function, verify_with_cfg};
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a pass changed, so the context knows which analyses to drop.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Changed {
    /// Nothing: every analysis stays.
    Nothing,
    /// Instructions, operands or flags, not blocks or terminators: the CFGs, dominance and
    /// loops stay; liveness (and any analysis of values) is dropped.
    Instructions,
    /// Blocks or terminators: every analysis is dropped.
    Cfg,
}

/// The one error type of passes.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PassError {
    /// The input uses something the target cannot do; the message names it.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// The function is not a structured program.
    #[error("{}: {}", .0.block, .0.message)]
    Structure(StructureError),
    /// The function does not verify after a pass: a bug in that pass.
    #[error("the function does not verify after `{pass}`: {}", first(.errors))]
    Verify {
        pass: String,
        errors: Vec<VerifyError>,
    },
    /// A pass could not do its job on valid input (say why).
    #[error("{pass}: {message}")]
    Failed { pass: String, message: String },
}

fn first(errors: &[VerifyError]) -> String {
    match errors {
        [] => "no error".into(),
        [e] => e.to_string(),
        [e, rest @ ..] => format!("{e} (and {} more)", rest.len()),
    }
}

/// What `KILN_DEBUG` asked for.
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
pub struct DebugFlags {
    /// `print`: the function after every pass and allocation step, on standard error.
    pub print: bool,
    /// `verify`: the verifier after every pass (always in debug builds, so in every test) and
    /// the checker after every allocation.
    pub verify: bool,
    /// `time`: each pass's time on standard error (always recorded in [`Context::timings`]).
    pub time: bool,
    /// `ra`: the register allocators' traces (merge sets, retries, failed picks) on standard
    /// error.
    pub ra: bool,
}

impl DebugFlags {
    /// From a `KILN_DEBUG`-style list.
    pub fn parse(list: &str) -> DebugFlags {
        let has = |w: &str| list.split(',').any(|x| x.trim() == w);
        DebugFlags {
            print: has("print"),
            verify: has("verify"),
            time: has("time"),
            ra: has("ra"),
        }
    }

    /// The `KILN_DEBUG` environment variable, read and parsed once per process.
    pub fn from_env() -> DebugFlags {
        static FLAGS: std::sync::OnceLock<DebugFlags> = std::sync::OnceLock::new();
        *FLAGS.get_or_init(|| DebugFlags::parse(&std::env::var("KILN_DEBUG").unwrap_or_default()))
    }
}

/// Where each temp is defined and which temps are linear: what value-based passes look up
/// first (one walk of the function).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DefSites {
    /// (block, instruction index) of each temp's definition; `None` for numbers nothing
    /// defines.
    pub sites: Vec<Option<(kiln_ir::Block, usize)>>,
    /// [`Function::linear_temps`].
    pub linear: Vec<bool>,
}

impl DefSites {
    pub fn compute(func: &Function) -> DefSites {
        let mut sites = vec![None; func.temps.len()];
        let mut linear = func.uniform_file_temps();
        for b in func.block_ids() {
            for (i, inst) in func.block(b).insts.iter().enumerate() {
                for d in &inst.defs {
                    if let Some(s) = sites.get_mut(d.temp.index()) {
                        *s = Some((b, i));
                    }
                }
                func.mark_linear_defs(inst, &mut linear);
            }
        }
        DefSites { sites, linear }
    }
}

/// A function with its cached analyses.
pub struct Context {
    func: Function,
    cfg: Option<Arc<Cfg>>,
    dom: Option<Arc<(DomTree, DomTree)>>,
    liveness: Option<Arc<Liveness>>,
    divergence: Option<Arc<Divergence>>,
    def_sites: Option<Arc<DefSites>>,
    /// The CFG cached is the one [`Context::replace_func`] was given for the function as it
    /// is (no [`Context::func_mut`] since): the pass running keeps it past its end.
    cfg_given: bool,
    /// Definition sites the pass running found for the function as it leaves it
    /// ([`Context::give_def_sites`]), kept past its end.
    sites_given: Option<Arc<DefSites>>,
    pub debug: DebugFlags,
    /// (pass, time) of every pass run, in order.
    pub timings: Vec<(&'static str, Duration)>,
}

impl fmt::Debug for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Context")
            .field("func", &self.func.name)
            .field("cfg", &self.cfg.is_some())
            .field("dom", &self.dom.is_some())
            .field("liveness", &self.liveness.is_some())
            .field("divergence", &self.divergence.is_some())
            .finish()
    }
}

impl Context {
    /// A context for `func`, with `KILN_DEBUG`'s flags.
    pub fn new(func: Function) -> Context {
        Context::with_debug(func, DebugFlags::from_env())
    }

    pub fn with_debug(func: Function, debug: DebugFlags) -> Context {
        Context {
            func,
            cfg: None,
            dom: None,
            liveness: None,
            divergence: None,
            def_sites: None,
            cfg_given: false,
            sites_given: None,
            debug,
            // A middle end runs a few dozen passes.
            timings: Vec::with_capacity(64),
        }
    }

    /// Gives the context the definition sites of its function, computed on the same
    /// instructions elsewhere (on the function it is a copy of).
    pub fn with_def_sites(mut self, sites: DefSites) -> Context {
        self.def_sites = Some(Arc::new(sites));
        self
    }

    pub fn func(&self) -> &Function {
        &self.func
    }

    /// The function, for a pass to change: report what changed through [`Context::run`]'s
    /// result (or [`Context::invalidate`] outside a pass).
    pub fn func_mut(&mut self) -> &mut Function {
        self.cfg_given = false;
        &mut self.func
    }

    /// Replaces the function with `func`, whose CFG `cfg` is (the pass that built the function
    /// computed it to check its blocks): every analysis is dropped but that CFG, which stays
    /// past the end of the pass unless the function changes again.
    pub fn replace_func(&mut self, func: Function, cfg: Cfg) {
        self.func = func;
        self.invalidate(Changed::Cfg);
        self.cfg = Some(Arc::new(cfg));
        self.cfg_given = true;
    }

    /// Gives the context the definition sites of its function as the pass running leaves it
    /// (found by its last walk, which changed nothing): they stay past the end of the pass.
    pub fn give_def_sites(&mut self, sites: Arc<DefSites>) {
        self.sites_given = Some(sites);
    }

    /// Numbers the function's temps without gaps (`Function::compact_temps`): the blocks stay,
    /// and so do the CFGs and dominance; what is kept per temp is dropped.
    pub fn compact_temps(&mut self) {
        let before = self.func.temps.len();
        self.func.compact_temps();
        if self.func.temps.len() != before {
            // Renumbered values, the same instructions and blocks.
            self.invalidate(Changed::Instructions);
        }
    }

    pub fn into_func(self) -> Function {
        self.func
    }

    /// Both CFGs, loops and ifs, computed once until a pass changes the blocks.
    pub fn cfg(&mut self) -> Result<Arc<Cfg>, PassError> {
        if self.cfg.is_none() {
            self.cfg = Some(Arc::new(
                Cfg::compute(&self.func).map_err(PassError::Structure)?,
            ));
        }
        Ok(self.cfg.clone().expect("just computed"))
    }

    /// Dominator trees of the logical and the linear CFG.
    pub fn dominance(&mut self) -> Result<Arc<(DomTree, DomTree)>, PassError> {
        if self.dom.is_none() {
            let cfg = self.cfg()?;
            self.dom = Some(Arc::new((
                DomTree::compute(&cfg.logical),
                DomTree::compute(&cfg.linear),
            )));
        }
        Ok(self.dom.clone().expect("just computed"))
    }

    /// Liveness with its kill flags written into the function (flags only: no other analysis
    /// depends on them).
    pub fn liveness(&mut self) -> Result<Arc<Liveness>, PassError> {
        if self.liveness.is_none() {
            let cfg = self.cfg()?;
            self.liveness = Some(Arc::new(compute_liveness(&mut self.func, &cfg)));
        }
        Ok(self.liveness.clone().expect("just computed"))
    }

    /// Definition sites and linear temps, computed once until a pass changes instructions.
    pub fn def_sites(&mut self) -> Arc<DefSites> {
        self.def_sites
            .get_or_insert_with(|| Arc::new(DefSites::compute(&self.func)))
            .clone()
    }

    /// Uniform values and branches (NIR's divergence analysis), computed once until a pass
    /// changes instructions.
    pub fn divergence(&mut self) -> Result<Arc<Divergence>, PassError> {
        if self.divergence.is_none() {
            let cfg = self.cfg()?;
            self.divergence = Some(Arc::new(Divergence::compute(&self.func, &cfg)));
        }
        Ok(self.divergence.clone().expect("just computed"))
    }

    /// Drops what `changed` invalidates.
    pub fn invalidate(&mut self, changed: Changed) {
        match changed {
            Changed::Nothing => {}
            Changed::Instructions => {
                self.liveness = None;
                self.divergence = None;
                self.def_sites = None;
            }
            Changed::Cfg => {
                self.cfg = None;
                self.dom = None;
                self.liveness = None;
                self.divergence = None;
                self.def_sites = None;
            }
        }
    }

    /// Whether the CFG is cached (for tests of invalidation).
    pub fn has_cfg(&self) -> bool {
        self.cfg.is_some()
    }

    /// Whether liveness is cached.
    pub fn has_liveness(&self) -> bool {
        self.liveness.is_some()
    }

    /// Runs the verifier with the cached CFG.
    pub fn verify(&mut self, after: &str) -> Result<(), PassError> {
        let verdict = match self.cfg() {
            Ok(cfg) => verify_with_cfg(&self.func, &cfg),
            // The verifier names the structural fault itself.
            Err(_) => kiln_ir::verify(&self.func),
        };
        verdict.map_err(|errors| PassError::Verify {
            pass: after.to_string(),
            errors,
        })
    }

    /// Runs one pass: `pass` changes the function and says what it changed; the context drops
    /// the analyses that change invalidates, then prints, verifies and times as asked.
    pub fn run(
        &mut self,
        name: &'static str,
        pass: impl FnOnce(&mut Context) -> Result<Changed, PassError>,
    ) -> Result<Changed, PassError> {
        let start = Instant::now();
        self.cfg_given = false;
        self.sites_given = None;
        let changed = pass(self)?;
        let took = start.elapsed();
        let given = (changed == Changed::Cfg && self.cfg_given)
            .then(|| self.cfg.take())
            .flatten();
        self.invalidate(changed);
        self.cfg = self.cfg.take().or(given);
        if let Some(sites) = self.sites_given.take() {
            debug_assert!(
                *sites == DefSites::compute(&self.func),
                "{name}: the definition sites given are the function's"
            );
            self.def_sites = Some(sites);
        }
        self.timings.push((name, took));
        if self.debug.time {
            let what = match changed {
                Changed::Nothing => "nothing",
                Changed::Instructions => "instructions",
                Changed::Cfg => "blocks",
            };
            eprintln!(
                "kiln: {name}: {:.3} ms, changed {what}",
                took.as_secs_f64() * 1e3
            );
        }
        if self.debug.print {
            eprintln!("; after {name}\n{}", print_function(&self.func));
        }
        if (self.debug.verify || cfg!(debug_assertions)) && changed != Changed::Nothing {
            self.verify(name)?;
        }
        Ok(changed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_ir::generate::{GenConfig, generate};
    use kiln_ir::{Opcode, Operand};

    fn context() -> Context {
        Context::with_debug(
            generate(&GenConfig::new(7)),
            DebugFlags {
                verify: true,
                ..DebugFlags::default()
            },
        )
    }

    #[test]
    fn analyses_are_cached_until_invalidated() {
        let mut cx = context();
        let a = cx.cfg().unwrap();
        let b = cx.cfg().unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        cx.liveness().unwrap();
        let d = cx.divergence().unwrap();
        cx.run("nothing", |_| Ok(Changed::Nothing)).unwrap();
        assert!(cx.has_cfg() && cx.has_liveness());
        assert!(Arc::ptr_eq(&d, &cx.divergence().unwrap()));
        cx.run("insts", |_| Ok(Changed::Instructions)).unwrap();
        assert!(cx.has_cfg() && !cx.has_liveness());
        assert!(!Arc::ptr_eq(&d, &cx.divergence().unwrap()));
        assert!(Arc::ptr_eq(&a, &cx.cfg().unwrap()));
        cx.run("blocks", |_| Ok(Changed::Cfg)).unwrap();
        // Dropped, then computed anew by the verifier.
        assert!(!Arc::ptr_eq(&a, &cx.cfg().unwrap()));
        assert_eq!(cx.timings.len(), 3);
    }

    #[test]
    fn a_cfg_given_with_the_function_outlives_its_pass() {
        let mut cx = context();
        let cfg = |cx: &Context| Cfg::compute(cx.func()).unwrap();
        cx.run("rebuild", |cx| {
            let (func, cfg) = (cx.func().clone(), cfg(cx));
            cx.replace_func(func, cfg);
            Ok(Changed::Cfg)
        })
        .unwrap();
        let given = cx.cfg().unwrap();
        cx.run("nothing", |_| Ok(Changed::Nothing)).unwrap();
        assert!(Arc::ptr_eq(&given, &cx.cfg().unwrap()));
        // Changed after it was given: dropped at the end of the pass.
        cx.run("rebuild, then edit", |cx| {
            let (func, cfg) = (cx.func().clone(), cfg(cx));
            cx.replace_func(func, cfg);
            let kept = cx.cfg().unwrap();
            cx.func_mut();
            assert!(
                Arc::ptr_eq(&kept, &cx.cfg().unwrap()),
                "cached within the pass"
            );
            Ok(Changed::Cfg)
        })
        .unwrap();
        let after = cx.cfg().unwrap();
        assert!(!Arc::ptr_eq(&given, &after));
        // A pass that changes the blocks without giving a CFG drops the cached one.
        cx.run("blocks", |_| Ok(Changed::Cfg)).unwrap();
        assert!(!Arc::ptr_eq(&after, &cx.cfg().unwrap()));
    }

    #[test]
    fn a_pass_that_breaks_the_function_is_named() {
        let mut cx = context();
        let err = cx
            .run("breaker", |cx| {
                // A use of a temp nothing defines.
                let f = cx.func_mut();
                let bogus = kiln_ir::Temp(f.temps.len() as u32 + 5);
                let mut inst = kiln_ir::Inst::new(Opcode::Output);
                inst.imms.push(99);
                inst.operands.push(Operand::temp(bogus));
                f.blocks[0].insts.insert(0, inst);
                Ok(Changed::Instructions)
            })
            .unwrap_err();
        match err {
            PassError::Verify { pass, errors } => {
                assert_eq!(pass, "breaker");
                assert!(!errors.is_empty());
            }
            other => panic!("{other}"),
        }
    }

    #[test]
    fn debug_list_parses() {
        let d = DebugFlags::parse("print, time");
        assert!(d.print && d.time);
        assert!(!d.verify);
        assert!(DebugFlags::parse("verify").verify);
    }
}
