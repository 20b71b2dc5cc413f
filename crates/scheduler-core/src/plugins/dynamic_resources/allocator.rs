//! The structured allocator (upstream `dynamic-resource-allocation/structured`): given the
//! claims a pod still needs allocated, the pools of devices and the devices already taken,
//! find devices on one node for every request of every claim, or say none exist.
//!
//! Built once per pod ([`Allocator::new`], in PreFilter) over a device index shared while
//! the slices stay the same (pools, their completeness, slices by node: `device_index`),
//! then asked once per node ([`Allocator::allocate`], in Filter, in parallel). The search is
//! upstream's: claims in order, requests in order, one device after the other, backtracking
//! on a dead end; the first full solution wins. Class selector results are kept per device
//! across pods (in the index); request selector results within one call.

use crate::types::LabelSet;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::resource::v1 as dra;

use crate::types::dra::capacity::{self, Amount};
use crate::types::dra::cel::{AttrValue, Deadline, EvalError, split_qualified};
use crate::types::dra::{
    ALLOCATION_RESULTS_MAX_SIZE, AllocationMode, ClaimRequest, DeviceClassInfo, DeviceId,
    DeviceNodes, DraObjects, RequestSpec, ResourceClaimInfo, ResourceSliceInfo, SharedUse,
    SliceDevice,
};

use super::device_index::{ClassMatches, DeviceIndex, IndexedSlice};

/// Why allocation stopped on a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllocError {
    /// Something is wrong with a claim or class (bad selector, bad request): the attempt
    /// fails with an error, as upstream's.
    Fatal(String),
    /// This node cannot be used, for a reason worth telling (invalid pools).
    Node(String),
    /// The search ran past its time limit (`DynamicResourcesArgs.filterTimeout`).
    TimedOut,
}

/// The per-pod part of allocation.
#[derive(Debug, Clone)]
pub struct Allocator {
    claims: Vec<Arc<ResourceClaimInfo>>,
    classes: HashMap<String, Arc<DeviceClassInfo>>,
    /// Pools and devices, shared by every pod while the slices stay the same.
    index: Arc<DeviceIndex>,
    /// Per class the pod uses: its selectors' results per device, shared likewise.
    class_matches: HashMap<String, Arc<ClassMatches>>,
    allocated: Arc<HashMap<DeviceId, u32>>,
    /// Shares of devices allowing multiple allocations (consumable capacity).
    shared: Arc<HashMap<DeviceId, SharedUse>>,
    /// Devices of claims preemption would free (victims'), usable in this attempt.
    freed: HashSet<DeviceId>,
    /// Shares of claims preemption would free: per device, how many and what they consume.
    freed_shares: HashMap<DeviceId, SharedUse>,
    /// DRADeviceBindingConditions: devices with binding conditions may be allocated.
    binding_conditions: bool,
    /// DRADeviceCompatibilityGroups: groups enforced; off, devices declaring them (and
    /// devices joining a counter set a held device declared them on) are skipped.
    pub(super) compatibility_groups: bool,
}

impl Allocator {
    /// An allocator with its own device index (tests; the plugin shares one per snapshot).
    pub fn new(objects: &DraObjects, claims: Vec<Arc<ResourceClaimInfo>>) -> Self {
        Self::with_index(Arc::new(DeviceIndex::build(objects)), objects, claims)
    }

    pub(super) fn with_index(
        index: Arc<DeviceIndex>,
        objects: &DraObjects,
        claims: Vec<Arc<ResourceClaimInfo>>,
    ) -> Self {
        let classes = claims
            .iter()
            .flat_map(|c| &c.requests)
            .flat_map(|r| match r {
                ClaimRequest::Exactly(s) => std::slice::from_ref(s),
                ClaimRequest::FirstAvailable { subrequests, .. } => subrequests.as_slice(),
                ClaimRequest::Unknown { .. } => &[],
            })
            .filter_map(|s| {
                objects
                    .class(&s.device_class_name)
                    .map(|c| (c.name.clone(), c.clone()))
            })
            .collect::<HashMap<String, Arc<DeviceClassInfo>>>();
        let class_matches = classes
            .iter()
            .map(|(n, c)| (n.clone(), index.class_matches(c)))
            .collect();
        Allocator {
            claims,
            classes,
            index,
            class_matches,
            allocated: objects.allocated.clone(),
            shared: objects.shared.clone(),
            freed: HashSet::new(),
            freed_shares: HashMap::new(),
            binding_conditions: objects.binding_conditions(),
            compatibility_groups: objects.compatibility_groups(),
        }
    }

    pub fn claims(&self) -> &[Arc<ResourceClaimInfo>] {
        &self.claims
    }

    /// Treats the devices as free in this attempt (preemption: the victims' claims).
    pub fn free_devices(&mut self, ids: impl IntoIterator<Item = DeviceId>) {
        self.freed.extend(ids);
    }

    /// Takes the devices again (a victim added back).
    pub fn unfree_devices(&mut self, ids: impl IntoIterator<Item = DeviceId>) {
        for id in ids {
            self.freed.remove(&id);
        }
    }

    /// Treats the shares as given back in this attempt (preemption: the victims' claims).
    pub fn free_shares(
        &mut self,
        shares: impl IntoIterator<Item = (DeviceId, Vec<(String, i128)>)>,
    ) {
        for (id, consumed) in shares {
            let u = self.freed_shares.entry(id).or_default();
            u.shares += 1;
            for (k, n) in consumed {
                *u.consumed.entry(k).or_default() += n;
            }
        }
    }

    /// Takes the shares again (a victim added back).
    pub fn unfree_shares(
        &mut self,
        shares: impl IntoIterator<Item = (DeviceId, Vec<(String, i128)>)>,
    ) {
        for (id, consumed) in shares {
            let Some(u) = self.freed_shares.get_mut(&id) else {
                continue;
            };
            u.shares = u.shares.saturating_sub(1);
            for (k, n) in consumed {
                *u.consumed.entry(k).or_default() -= n;
            }
            if u.shares == 0 {
                self.freed_shares.remove(&id);
            }
        }
    }

    fn in_use(&self, id: &DeviceId) -> bool {
        self.allocated.contains_key(id) && !self.freed.contains(id)
    }

    /// Whether the device's counters are taken: held whole, or some share of it allocated.
    fn holds_counters(&self, id: &DeviceId) -> bool {
        self.in_use(id) || self.has_shares(id)
    }

    /// Whether shares of the device are allocated (and not all freed by preemption).
    fn has_shares(&self, id: &DeviceId) -> bool {
        let freed = self.freed_shares.get(id).map_or(0, |u| u.shares);
        self.shared.get(id).is_some_and(|u| u.shares > freed)
    }

    /// What allocated shares of the device consume of a capacity (nano-units).
    fn shared_use(&self, id: &DeviceId, capacity: &str) -> i128 {
        let of = |m: &HashMap<DeviceId, SharedUse>| {
            m.get(id)
                .and_then(|u| u.consumed.get(capacity))
                .copied()
                .unwrap_or(0)
        };
        of(&self.shared) - of(&self.freed_shares)
    }

    /// One allocation result per claim, in order, for the node; `Ok(None)` when the devices
    /// the node can reach do not satisfy every claim.
    pub fn allocate<L: LabelSet>(
        &self,
        node: &str,
        labels: &L,
    ) -> Result<Option<Vec<dra::AllocationResult>>, AllocError> {
        self.allocate_until(node, labels, &never)
    }

    /// [`Self::allocate`], giving up with [`AllocError::TimedOut`] once `deadline` passes:
    /// before each step of the search, and inside each selector evaluation (a selector
    /// that runs long is stopped in the middle, as cel-go's interrupt check does).
    pub fn allocate_by<L: LabelSet>(
        &self,
        node: &str,
        labels: &L,
        deadline: Deadline,
    ) -> Result<Option<Vec<dra::AllocationResult>>, AllocError> {
        self.search(node, labels, &|| deadline.passed(), Some(deadline))
    }

    /// [`Self::allocate`], giving up with [`AllocError::TimedOut`] once `expired` says so
    /// (asked before each step of the search, as upstream checks its context).
    pub fn allocate_until<L: LabelSet>(
        &self,
        node: &str,
        labels: &L,
        expired: &dyn Fn() -> bool,
    ) -> Result<Option<Vec<dra::AllocationResult>>, AllocError> {
        self.search(node, labels, expired, None)
    }

    fn search<L: LabelSet>(
        &self,
        node: &str,
        labels: &L,
        expired: &dyn Fn() -> bool,
        deadline: Option<Deadline>,
    ) -> Result<Option<Vec<dra::AllocationResult>>, AllocError> {
        // Devices the node reaches, pool by pool (pools sorted by driver and name, slices by
        // name), skipping incomplete and invalid pools.
        let index = &*self.index;
        let mut slices: Vec<&IndexedSlice> = index
            .local
            .get(node)
            .into_iter()
            .flatten()
            .chain(index.shared.iter().filter(|e| {
                let s = &e.slice;
                match &s.nodes {
                    DeviceNodes::PerDevice => s
                        .devices
                        .iter()
                        .any(|d| d.nodes.as_ref().is_some_and(|n| n.reaches(node, labels))),
                    n => n.reaches(node, labels),
                }
            }))
            .collect();
        if !index.shared.is_empty() {
            slices.sort_by(|a, b| (a.pool, &a.slice.name).cmp(&(b.pool, &b.slice.name)));
        }
        super::binding_conditions::binding_pools_last(&mut slices);
        let node_pools: Vec<usize> = {
            let mut v: Vec<usize> = slices.iter().map(|e| e.pool).collect();
            v.dedup();
            v
        };
        let mut cands = Vec::new();
        for e in &slices {
            let pool = &index.pools[e.pool];
            if pool.incomplete || pool.invalid.is_some() {
                continue;
            }
            for (i, d) in e.slice.devices.iter().enumerate() {
                if d.unsupported.is_some()
                    || (!self.binding_conditions && d.has_binding_conditions())
                    || (!self.compatibility_groups && d.declares_groups())
                {
                    continue;
                }
                if let Some(n) = &d.nodes
                    && !n.reaches(node, labels)
                {
                    continue;
                }
                cands.push(Cand {
                    pool: e.pool,
                    slice: &e.slice,
                    dev: d,
                    id: &e.ids[i],
                    ordinal: e.first + i,
                });
            }
        }
        let mut run = Run::new(self, node, labels, cands);
        run.expired = expired;
        run.deadline = deadline;
        run.prepare(&node_pools)?;
        match run.allocate_one(Pos::default(), false) {
            Ok(true) => Ok(Some(run.results())),
            Ok(false) | Err(Stop::MaxSize) => {
                if let Some(p) = node_pools
                    .iter()
                    .find(|p| index.pools[**p].invalid.is_some())
                {
                    let pool = &index.pools[*p];
                    return Err(AllocError::Node(format!(
                        "invalid resource pools were encountered: pool {}: {}",
                        pool.id(),
                        pool.invalid.as_deref().unwrap_or_default()
                    )));
                }
                Ok(None)
            }
            Err(Stop::Fatal(e)) => Err(AllocError::Fatal(e)),
            Err(Stop::TimedOut) => Err(AllocError::TimedOut),
        }
    }
}

struct Cand<'a> {
    pool: usize,
    slice: &'a ResourceSliceInfo,
    dev: &'a SliceDevice,
    id: &'a DeviceId,
    /// The device's number in the index (for the class selector results).
    ordinal: usize,
}

/// One request, or one subrequest of a `firstAvailable` request.
struct ReqData<'a> {
    spec: &'a RequestSpec,
    parent: Option<&'a str>,
    class: &'a DeviceClassInfo,
    num: usize,
    /// `All` mode: the devices, decided up front.
    all: Vec<usize>,
}

impl ReqData<'_> {
    fn full_name(&self) -> String {
        match self.parent {
            Some(p) => format!("{p}/{}", self.spec.name),
            None => self.spec.name.clone(),
        }
    }
}

/// One device the search picked for a claim.
#[derive(Clone)]
pub(super) struct Picked {
    cand: usize,
    /// `request` or `request/subrequest`.
    request: String,
    admin: bool,
    /// A share of a device allowing multiple allocations: what it consumes.
    share: Option<BTreeMap<String, Amount>>,
    /// This pick took the device's counters (the device's first share, or a whole device).
    counters: bool,
}

struct ConstraintState {
    requests: Vec<String>,
    attribute: String,
    value: Option<AttrValue>,
    count: usize,
}

impl ConstraintState {
    fn applies(&self, request: &str, parent: Option<&str>) -> bool {
        if self.requests.is_empty() {
            return true;
        }
        match parent {
            None => self.requests.iter().any(|r| r == request),
            Some(p) => {
                let full = format!("{p}/{request}");
                self.requests.iter().any(|r| r == p || *r == full)
            }
        }
    }
}

fn lookup_attribute<'a>(dev: &'a SliceDevice, driver: &str, name: &str) -> Option<&'a AttrValue> {
    if let Some(v) = dev.attributes.get(name) {
        return Some(v);
    }
    let (domain, id) = split_qualified(driver, name);
    if domain != driver || !name.contains('/') {
        return None;
    }
    dev.attributes.get(id)
}

enum Stop {
    MaxSize,
    Fatal(String),
    TimedOut,
}

#[derive(Clone, Copy, Default)]
struct Pos {
    claim: usize,
    request: usize,
    sub: usize,
    device: usize,
}

struct Run<'a> {
    al: &'a Allocator,
    node: &'a str,
    labels: &'a dyn LabelSet,
    cands: Vec<Cand<'a>>,
    /// Per claim, per request: one entry, or one per subrequest.
    reqs: Vec<Vec<Vec<ReqData<'a>>>>,
    constraints: Vec<Vec<ConstraintState>>,
    /// Candidate index -> claims it is being allocated for (whole devices only).
    allocating: HashMap<usize, Vec<usize>>,
    /// Candidate index -> what the shares this search picked consume, and how many.
    allocating_shares: HashMap<usize, (u32, BTreeMap<String, i128>)>,
    results: Vec<Vec<Picked>>,
    selected_sub: HashMap<(usize, usize), usize>,
    matches: HashMap<(usize, usize, usize, usize), bool>,
    /// Per-attempt use of the pools' shared counters (picks of this search).
    counters: counters::Tracker,
    /// Whether the time limit has passed.
    expired: &'a dyn Fn() -> bool,
    /// The time limit, for selector evaluations to check inside themselves.
    deadline: Option<Deadline>,
}

fn never() -> bool {
    false
}

fn kobj(c: &ResourceClaimInfo) -> String {
    format!("{}/{}", c.namespace, c.name)
}

impl<'a> Run<'a> {
    fn new(
        al: &'a Allocator,
        node: &'a str,
        labels: &'a dyn LabelSet,
        cands: Vec<Cand<'a>>,
    ) -> Self {
        Run {
            al,
            node,
            labels,
            cands,
            reqs: Vec::new(),
            constraints: Vec::new(),
            allocating: HashMap::new(),
            allocating_shares: HashMap::new(),
            results: vec![Vec::new(); al.claims.len()],
            selected_sub: HashMap::new(),
            matches: HashMap::new(),
            counters: counters::Tracker::default(),
            expired: &never,
            deadline: None,
        }
    }

    /// Upstream's validation of every request and constraint, and the `All` device sets.
    fn prepare(&mut self, node_pools: &[usize]) -> Result<(), AllocError> {
        let al = self.al;
        for (ci, claim) in al.claims.iter().enumerate() {
            let mut per_claim = Vec::new();
            let mut min_devices = 0usize;
            for (ri, req) in claim.requests.iter().enumerate() {
                let entries: Vec<(&RequestSpec, Option<&str>)> = match req {
                    ClaimRequest::Exactly(s) => vec![(s, None)],
                    ClaimRequest::FirstAvailable { name, subrequests } => subrequests
                        .iter()
                        .map(|s| (s, Some(name.as_str())))
                        .collect(),
                    ClaimRequest::Unknown { name } => {
                        return Err(AllocError::Fatal(format!(
                            "claim {}, request {name}: unknown request type",
                            kobj(claim)
                        )));
                    }
                };
                let mut datas = Vec::new();
                for (si, (spec, parent)) in entries.into_iter().enumerate() {
                    let d = self.validate(ci, ri, si, spec, parent, node_pools)?;
                    datas.push(d);
                }
                min_devices += datas.iter().map(|d| d.num).min().unwrap_or(0);
                per_claim.push(datas);
            }
            if min_devices > ALLOCATION_RESULTS_MAX_SIZE {
                return Err(AllocError::Fatal(format!(
                    "claim {}: number of requested devices {min_devices} exceeds the claim limit of {ALLOCATION_RESULTS_MAX_SIZE}",
                    kobj(claim)
                )));
            }
            self.reqs.push(per_claim);
            let mut cs = Vec::new();
            for (i, k) in claim.constraints.iter().enumerate() {
                let Some(attr) = &k.match_attribute else {
                    return Err(AllocError::Fatal(format!(
                        "claim {}, constraint #{i}: empty constraint (unsupported constraint type?)",
                        kobj(claim)
                    )));
                };
                cs.push(ConstraintState {
                    requests: k.requests.clone(),
                    attribute: attr.clone(),
                    value: None,
                    count: 0,
                });
            }
            self.constraints.push(cs);
        }
        Ok(())
    }

    fn validate(
        &mut self,
        ci: usize,
        ri: usize,
        si: usize,
        spec: &'a RequestSpec,
        parent: Option<&'a str>,
        node_pools: &[usize],
    ) -> Result<ReqData<'a>, AllocError> {
        let al = self.al;
        let claim = &al.claims[ci];
        let name = match parent {
            Some(p) => format!("{p}/{}", spec.name),
            None => spec.name.clone(),
        };
        let fatal = |m: String| {
            Err(AllocError::Fatal(format!(
                "claim {}, request {name}: {m}",
                kobj(claim)
            )))
        };
        for (i, s) in spec.selectors.iter().enumerate() {
            if s.expression.is_empty() {
                return Err(AllocError::Fatal(format!(
                    "claim {}, request {name}, selector #{i}: CEL expression empty (unsupported selector type?)",
                    kobj(claim)
                )));
            }
        }
        if let Some(what) = spec.unsupported {
            return fatal(what.to_string());
        }
        if spec.device_class_name.is_empty() {
            return fatal("missing device class name (unsupported request type?)".into());
        }
        let Some(class) = al.classes.get(&spec.device_class_name) else {
            return fatal(format!(
                "could not retrieve device class {}: deviceclass.resource.k8s.io {:?} not found",
                spec.device_class_name, spec.device_class_name
            ));
        };
        let mut data = ReqData {
            spec,
            parent,
            class,
            num: 0,
            all: Vec::new(),
        };
        match &spec.mode {
            AllocationMode::ExactCount(n) => {
                let Ok(n) = usize::try_from(*n) else {
                    return fatal(format!("exact count {n} is invalid"));
                };
                data.num = n;
            }
            AllocationMode::All => {
                for p in node_pools {
                    let pool = &al.index.pools[*p];
                    if pool.incomplete {
                        return fatal(format!(
                            "asks for all devices, but resource pool {} is currently being updated",
                            pool.id()
                        ));
                    }
                    if pool.invalid.is_some() {
                        return fatal(format!(
                            "asks for all devices, but resource pool {} is currently invalid",
                            pool.id()
                        ));
                    }
                }
                for i in 0..self.cands.len() {
                    if self.selectable(i, ci, (ri, si), &data)?
                        && self.capacity_share(i, spec).is_some()
                    {
                        data.all.push(i);
                    }
                }
                data.num = data.all.len();
            }
            AllocationMode::Unknown(m) => {
                return fatal(format!("unsupported count mode {m}"));
            }
        }
        Ok(data)
    }

    /// The device passes the class's and the request's selectors (cached per request).
    fn selectable(
        &mut self,
        cand: usize,
        ci: usize,
        (ri, si): (usize, usize),
        data: &ReqData<'_>,
    ) -> Result<bool, AllocError> {
        if let Some(m) = self.matches.get(&(cand, ci, ri, si)) {
            return Ok(*m);
        }
        let c = &self.cands[cand];
        let claim = &self.al.claims[ci];
        let deadline = self.deadline;
        let check = |sels: &[crate::types::dra::cel::CelSelector], who: &str| {
            for (i, s) in sels.iter().enumerate() {
                match s.matches_within(&c.dev.cel, deadline) {
                    Ok(true) => {}
                    Ok(false) => return Ok(false),
                    Err(EvalError::TimedOut) => return Err(AllocError::TimedOut),
                    Err(EvalError::Failed(e)) if s.compile_error().is_some() => {
                        return Err(AllocError::Fatal(format!("{who}: selector #{i}: {e}")));
                    }
                    Err(EvalError::Failed(e)) => {
                        return Err(AllocError::Fatal(format!(
                            "{who}: selector #{i} on device {}: {e}",
                            c.id
                        )));
                    }
                }
            }
            Ok(true)
        };
        // The class's answer for a device is shared across pods (see `device_index`).
        let cached = self.al.class_matches.get(&data.class.name);
        let class_ok = match cached.and_then(|m| m.get(c.ordinal)) {
            Some(ok) => ok,
            None => {
                let ok = check(&data.class.selectors, &format!("class {}", data.class.name))?;
                if let Some(m) = cached {
                    m.set(c.ordinal, ok);
                }
                ok
            }
        };
        let ok = class_ok
            && (data.spec.selectors.is_empty()
                || check(&data.spec.selectors, &format!("claim {}", kobj(claim)))?);
        self.matches.insert((cand, ci, ri, si), ok);
        Ok(ok)
    }

    /// Consumable capacity: what one share of the device would consume for the request,
    /// if it has room for it (upstream checks this for every device: a request's
    /// `capacity.requests` also filters devices allocated whole). `Some(None)`: nothing to
    /// record (a device allocated whole). `None`: the device cannot serve the request.
    fn capacity_share(
        &self,
        cand: usize,
        spec: &RequestSpec,
    ) -> Option<Option<BTreeMap<String, Amount>>> {
        let c = &self.cands[cand];
        let dev = c.dev;
        if !dev.allow_multiple && spec.capacity.is_none() {
            return Some(None);
        }
        let share = capacity::share_of(spec.capacity.as_ref(), &dev.capacity)?;
        if !dev.allow_multiple {
            return capacity::fits(&share, &dev.capacity, |_| 0).then_some(None);
        }
        let picked = self.allocating_shares.get(&cand).map(|(_, m)| m);
        let used = |name: &str| {
            self.al.shared_use(c.id, name) + picked.and_then(|m| m.get(name)).copied().unwrap_or(0)
        };
        capacity::fits(&share, &dev.capacity, used).then_some(Some(share))
    }

    fn device_in_use(&self, cand: usize) -> bool {
        self.al.in_use(self.cands[cand].id)
            || self.allocating.get(&cand).is_some_and(|v| !v.is_empty())
    }

    fn allocate_one(&mut self, r: Pos, in_sub: bool) -> Result<bool, Stop> {
        if (self.expired)() {
            return Err(Stop::TimedOut);
        }
        if r.claim >= self.al.claims.len() {
            return Ok(true);
        }
        if r.request >= self.reqs[r.claim].len() {
            return match self.allocate_one(
                Pos {
                    claim: r.claim + 1,
                    ..Pos::default()
                },
                false,
            ) {
                Err(Stop::MaxSize) => Ok(false),
                other => other,
            };
        }
        let subs = self.reqs[r.claim][r.request].len();
        let is_first_available = self.reqs[r.claim][r.request][0].parent.is_some();
        if !in_sub && is_first_available {
            let mut all_exceeded = true;
            for sub in 0..subs {
                match self.allocate_one(Pos { sub, ..r }, true) {
                    Err(Stop::MaxSize) => continue,
                    Err(e) => return Err(e),
                    Ok(done) => {
                        all_exceeded = false;
                        if done {
                            self.selected_sub.insert((r.claim, r.request), sub);
                            return Ok(true);
                        }
                    }
                }
            }
            return if all_exceeded {
                Err(Stop::MaxSize)
            } else {
                Ok(false)
            };
        }
        let (num, all_mode, admin) = {
            let d = &self.reqs[r.claim][r.request][r.sub];
            (
                d.num,
                d.spec.mode == AllocationMode::All,
                d.spec.admin_access,
            )
        };
        if all_mode && num == 0 {
            return Ok(false);
        }
        if r.device >= num {
            return self.allocate_one(
                Pos {
                    claim: r.claim,
                    request: r.request + 1,
                    ..Pos::default()
                },
                false,
            );
        }
        if self.results[r.claim].len() + num - r.device > ALLOCATION_RESULTS_MAX_SIZE {
            return Err(Stop::MaxSize);
        }
        let next = Pos {
            device: r.device + 1,
            ..r
        };
        if all_mode {
            let cand = self.reqs[r.claim][r.request][r.sub].all[r.device];
            if !self.allocate_device(r, cand, true)? {
                return Ok(false);
            }
            let done = self.allocate_one(next, in_sub);
            if !matches!(done, Ok(true)) {
                self.deallocate(r, cand);
            }
            return done;
        }
        for cand in 0..self.cands.len() {
            let busy = if admin {
                !self.cands[cand].dev.allow_multiple
                    && self
                        .allocating
                        .get(&cand)
                        .is_some_and(|v| v.contains(&r.claim))
            } else {
                self.device_in_use(cand)
            };
            if busy {
                continue;
            }
            match self.selectable_at(cand, r) {
                Ok(true) => {}
                Ok(false) => continue,
                Err(AllocError::Fatal(e)) | Err(AllocError::Node(e)) => return Err(Stop::Fatal(e)),
                Err(AllocError::TimedOut) => return Err(Stop::TimedOut),
            }
            if self
                .capacity_share(cand, self.reqs[r.claim][r.request][r.sub].spec)
                .is_none()
            {
                continue;
            }
            if !self.allocate_device(r, cand, false)? {
                continue;
            }
            match self.allocate_one(next, in_sub) {
                Ok(true) => return Ok(true),
                Ok(false) => self.deallocate(r, cand),
                Err(e) => {
                    self.deallocate(r, cand);
                    return Err(e);
                }
            }
        }
        Ok(false)
    }

    fn selectable_at(&mut self, cand: usize, r: Pos) -> Result<bool, AllocError> {
        if let Some(m) = self.matches.get(&(cand, r.claim, r.request, r.sub)) {
            return Ok(*m);
        }
        // Borrow the request data out of `self` for the check: it lives in `reqs`, which
        // `selectable` does not touch.
        let reqs = std::mem::take(&mut self.reqs);
        let out = self.selectable(
            cand,
            r.claim,
            (r.request, r.sub),
            &reqs[r.claim][r.request][r.sub],
        );
        self.reqs = reqs;
        out
    }

    /// Checks availability and constraints; on success records the device as allocating.
    fn allocate_device(&mut self, r: Pos, cand: usize, must: bool) -> Result<bool, Stop> {
        let (admin, name, parent) = {
            let d = &self.reqs[r.claim][r.request][r.sub];
            (
                d.spec.admin_access,
                d.spec.name.clone(),
                d.parent.map(str::to_string),
            )
        };
        let multiple = self.cands[cand].dev.allow_multiple;
        let busy = if admin {
            !multiple
                && self
                    .allocating
                    .get(&cand)
                    .is_some_and(|v| v.contains(&r.claim))
        } else {
            self.device_in_use(cand)
        };
        if busy {
            return Ok(false);
        }
        // A tainted device needs a toleration for each of its taints.
        let tolerations = &self.reqs[r.claim][r.request][r.sub].spec.tolerations;
        if self.cands[cand]
            .dev
            .taints
            .iter()
            .any(|t| !tolerations.iter().any(|tol| t.tolerated_by(tol)))
        {
            return Ok(false);
        }
        let Some(share) = self.capacity_share(cand, self.reqs[r.claim][r.request][r.sub].spec)
        else {
            return Ok(false);
        };
        // A device allowing multiple allocations takes its counters once, with its first
        // share (upstream skips the check while some of its capacity is in use).
        let counters = !(multiple
            && (self.al.has_shares(self.cands[cand].id)
                || self.allocating_shares.contains_key(&cand)));
        if counters && !self.take_counters(cand) {
            return Ok(false);
        }
        let (base, sub) = match &parent {
            Some(p) => (p.clone(), Some(name.as_str())),
            None => (name.clone(), None),
        };
        let c = &self.cands[cand];
        let mut added = Vec::new();
        let mut failed = false;
        for (i, k) in self.constraints[r.claim].iter_mut().enumerate() {
            if !k.applies(sub.unwrap_or(&base), sub.map(|_| base.as_str())) {
                continue;
            }
            let ok = match lookup_attribute(c.dev, &c.slice.driver, &k.attribute) {
                None => false,
                Some(v) if k.count == 0 => {
                    k.value = Some(v.clone());
                    true
                }
                Some(v) => k.value.as_ref() == Some(v),
            };
            if !ok {
                failed = true;
                break;
            }
            k.count += 1;
            added.push(i);
        }
        if failed {
            if counters {
                self.give_back_counters(cand);
            }
            for j in added {
                let k = &mut self.constraints[r.claim][j];
                k.count -= 1;
                if k.count == 0 {
                    k.value = None;
                }
            }
            if must {
                let claim = &self.al.claims[r.claim];
                return Err(Stop::Fatal(format!(
                    "claim {}, request {name}: cannot add device {} because a claim constraint would not be satisfied",
                    kobj(claim),
                    self.cands[cand].id
                )));
            }
            return Ok(false);
        }
        if let Some(share) = &share {
            let e = self.allocating_shares.entry(cand).or_default();
            e.0 += 1;
            for (k, a) in share {
                *e.1.entry(k.clone()).or_default() += a.nanos;
            }
        } else {
            self.allocating.entry(cand).or_default().push(r.claim);
        }
        let full = match &parent {
            Some(p) => format!("{p}/{name}"),
            None => name,
        };
        self.results[r.claim].push(Picked {
            cand,
            request: full,
            admin,
            share,
            counters,
        });
        Ok(true)
    }

    fn deallocate(&mut self, r: Pos, cand: usize) {
        let Some(picked) = self.results[r.claim].pop() else {
            return;
        };
        if picked.counters {
            self.give_back_counters(cand);
        }
        if let Some(share) = &picked.share
            && let Some(e) = self.allocating_shares.get_mut(&cand)
        {
            e.0 -= 1;
            for (k, a) in share {
                if let Some(v) = e.1.get_mut(k) {
                    *v -= a.nanos;
                }
            }
            if e.0 == 0 {
                self.allocating_shares.remove(&cand);
            }
        }
        let (name, parent) = {
            let d = &self.reqs[r.claim][r.request][r.sub];
            (d.spec.name.clone(), d.parent.map(str::to_string))
        };
        let (base, sub) = match &parent {
            Some(p) => (p.clone(), Some(name.as_str())),
            None => (name.clone(), None),
        };
        for k in self.constraints[r.claim].iter_mut() {
            if k.applies(sub.unwrap_or(&base), sub.map(|_| base.as_str())) {
                k.count -= 1;
                if k.count == 0 {
                    k.value = None;
                }
            }
        }
        if picked.share.is_none()
            && let Some(v) = self.allocating.get_mut(&cand)
            && let Some(pos) = v.iter().rposition(|c| *c == r.claim)
        {
            v.remove(pos);
        }
    }
}

#[path = "allocation_result.rs"]
mod result;

#[path = "counters.rs"]
pub(super) mod counters;

#[cfg(test)]
#[path = "allocator_tests.rs"]
pub(crate) mod tests;

#[cfg(test)]
#[path = "consumable_capacity_tests.rs"]
mod consumable_capacity_tests;
