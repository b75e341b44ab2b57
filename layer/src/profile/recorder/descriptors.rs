//! Descriptors as profile mode follows them (DESIGN §4 "State as the GPU reads it"): shader
//! modules and pipelines reflected, the buffer descriptors written into each set, what each
//! command buffer binds, and the buffers a dispatch or draw uses.

use super::*;

/// One buffer descriptor as written into a set.
#[derive(Clone, Copy, Debug)]
pub(super) struct Desc {
    pub(super) buffer: u64,
    offset: u64,
    /// `VK_WHOLE_SIZE` stays `u64::MAX`.
    range: u64,
    dynamic: bool,
    uniform: bool,
}

/// `(binding, array element)` → descriptor.
pub(super) type SetContents = BTreeMap<(u32, u32), Desc>;

#[derive(Default, Clone)]
pub(super) struct PointBinds {
    pipeline: Option<u64>,
    /// Shader objects bound to this bind point's stages (`vkCmdBindShadersEXT`): stage bit →
    /// shader. Binding a pipeline and binding shaders each disturb the other (VK_EXT_shader_object);
    /// echo keeps both and a dispatch or draw takes the union of their accesses — never less than
    /// the code that runs (issue 53).
    shaders: BTreeMap<u32, u64>,
    /// Set index → (set handle, its dynamic offsets).
    sets: BTreeMap<u32, (u64, Vec<u32>)>,
    /// Set index → pushed descriptors (replace a bound set at that index).
    push: BTreeMap<u32, SetContents>,
}

/// What a command buffer has bound, per bind point (0 compute, 1 graphics).
#[derive(Default)]
pub(super) struct CmdBinds {
    points: [PointBinds; 2],
}

pub(super) fn point_index(bp: vk::PipelineBindPoint) -> Option<usize> {
    match bp {
        vk::PipelineBindPoint::COMPUTE => Some(0),
        vk::PipelineBindPoint::GRAPHICS => Some(1),
        _ => None,
    }
}

/// The binding flags under which the GPU reads a binding's descriptors as they stand when the
/// command buffer is *submitted*, not as they stood when it was recorded. The specification
/// (VkDescriptorBindingFlagBits) lets an `UPDATE_AFTER_BIND` binding be written between the bind
/// and the submission, and an `UPDATE_UNUSED_WHILE_PENDING` one be written while a command buffer
/// that does not use the descriptor is pending — its next submission then reads the new one;
/// updating any other binding of a bound set invalidates the command buffer, so for them the
/// recorded contents are what runs. `PARTIALLY_BOUND` bindings are taken along: resolving them
/// at submission costs a record and cannot be wrong.
fn late_flags() -> vk::DescriptorBindingFlags {
    vk::DescriptorBindingFlags::UPDATE_AFTER_BIND
        | vk::DescriptorBindingFlags::UPDATE_UNUSED_WHILE_PENDING
        | vk::DescriptorBindingFlags::PARTIALLY_BOUND
}

/// One dispatch or draw's descriptor use of a set with late bindings: resolved at every
/// submission of its command buffer ([`Profiler::late_at_submit`]) into a `cmd_late_use` record.
pub(super) struct LateUse {
    id: u64,
    set: u32,
    handle: u64,
    dyn_offs: Vec<u32>,
    refl: Option<Arc<reflect::Bindings>>,
    late: Arc<std::collections::BTreeSet<u32>>,
}

/// The state of late-bound descriptors: which layouts and sets have late bindings, the late uses
/// each command buffer recorded, and the secondaries each executes (their late uses are resolved
/// when the primary is submitted).
#[derive(Default)]
pub(super) struct Late {
    /// The planted fault of `TEST_LATE_AT_RECORD`: no binding is late.
    off: bool,
    layouts: HandleMap<u64, Arc<std::collections::BTreeSet<u32>>>,
    sets: HandleMap<u64, Arc<std::collections::BTreeSet<u32>>>,
    uses: HandleMap<u64, Vec<LateUse>>,
    executes: HandleMap<u64, Vec<u64>>,
    next: AtomicU64,
}

impl Late {
    pub(super) fn new(off: bool) -> Late {
        Late {
            off,
            ..Default::default()
        }
    }

    /// A command buffer begins, is reset or freed: what it recorded is gone.
    pub(super) fn forget(&self, cmd: u64) {
        self.uses.remove(&cmd);
        self.executes.remove(&cmd);
    }

    /// `vkCmdExecuteCommands`: `secondaries` run in `cmd` at its submission.
    pub(super) fn executes(&self, cmd: u64, secondaries: &[u64]) {
        if secondaries
            .iter()
            .any(|s| self.uses.contains_key(s) || self.executes.contains_key(s))
        {
            self.executes
                .entry(cmd)
                .or_default()
                .extend_from_slice(secondaries);
        }
    }
}

/// The buffers of one set's descriptors a dispatch or draw uses, with the access reflection found
/// for their binding (unknown pipeline: read-write, uniform buffers: read); only the bindings
/// `keep` accepts, while dynamic offsets are dealt over every dynamic descriptor in order.
fn set_uses(
    refl: Option<&reflect::Bindings>,
    set: u32,
    contents: &SetContents,
    dyn_offs: &[u32],
    keep: &dyn Fn(u32) -> bool,
    uses: &mut Vec<BufferUse>,
) {
    let mut dyn_i = 0usize;
    for (&(binding, _), d) in contents.iter() {
        let extra_off = if d.dynamic {
            let o = dyn_offs.get(dyn_i).copied().unwrap_or(0) as u64;
            dyn_i += 1;
            o
        } else {
            0
        };
        if !keep(binding) {
            continue;
        }
        let access = match refl {
            Some(r) => match r.get(&(set, binding)) {
                Some(a) => {
                    if d.uniform {
                        Access::Read
                    } else {
                        *a
                    }
                }
                None => continue, // the shader never touches this binding
            },
            None if d.uniform => Access::Read,
            None => Access::ReadWrite,
        };
        uses.push(BufferUse {
            buffer: d.buffer,
            offset: d.offset.saturating_add(extra_off),
            size: d.range,
            access,
            kind: UseKind::Descriptor,
        });
    }
}

impl Profiler {
    // ------------------------------------------------------------------------ descriptors

    /// After `vkCreateDescriptorSetLayout`: the bindings whose descriptors are read at
    /// submission ([`late_flags`]), from `VkDescriptorSetLayoutBindingFlagsCreateInfo`.
    ///
    /// # Safety
    /// `info` must be a valid create info.
    pub unsafe fn on_set_layout(&self, layout: u64, info: &vk::DescriptorSetLayoutCreateInfo<'_>) {
        let mut late = std::collections::BTreeSet::new();
        let mut p = info.p_next as *const vk::BaseInStructure<'_>;
        while !p.is_null() {
            if (*p).s_type == vk::StructureType::DESCRIPTOR_SET_LAYOUT_BINDING_FLAGS_CREATE_INFO {
                let f = &*(p as *const vk::DescriptorSetLayoutBindingFlagsCreateInfo<'_>);
                let flags = crate::records::slice(f.p_binding_flags, f.binding_count);
                let bindings = crate::records::slice(info.p_bindings, info.binding_count);
                for (b, fl) in bindings.iter().zip(flags) {
                    if fl.intersects(late_flags()) {
                        late.insert(b.binding);
                    }
                }
            }
            p = (*p).p_next;
        }
        // Handles are recycled: every creation sets the entry anew.
        if late.is_empty() || self.late.off {
            self.late.layouts.remove(&layout);
        } else {
            self.late.layouts.insert(layout, Arc::new(late));
        }
    }

    /// After `vkCreateShaderModule`.
    ///
    /// # Safety
    /// `info` must be a valid create info.
    pub unsafe fn on_shader_module(&self, module: u64, info: &vk::ShaderModuleCreateInfo<'_>) {
        let words = if info.p_code.is_null() {
            &[][..]
        } else {
            std::slice::from_raw_parts(info.p_code, info.code_size / 4)
        };
        self.modules
            .insert(module, reflect::reflect(words).map(Arc::new));
    }

    pub fn on_destroy_module(&self, module: u64) {
        self.modules.remove(&module);
    }

    /// The bindings of one stage (`None`: unknown).
    unsafe fn stage_bindings(
        &self,
        stage: &vk::PipelineShaderStageCreateInfo<'_>,
    ) -> Option<reflect::Bindings> {
        let name = if stage.p_name.is_null() {
            "main".to_string()
        } else {
            CStr::from_ptr(stage.p_name).to_string_lossy().into_owned()
        };
        let module = if stage.module != vk::ShaderModule::null() {
            self.modules.get(&raw(stage.module))?.clone()?
        } else {
            // maintenance5 / graphics pipeline libraries: the code chained into the stage.
            let mut p = stage.p_next as *const vk::BaseInStructure<'_>;
            let mut found = None;
            while !p.is_null() {
                if (*p).s_type == vk::StructureType::SHADER_MODULE_CREATE_INFO {
                    let i = &*(p as *const vk::ShaderModuleCreateInfo<'_>);
                    if !i.p_code.is_null() {
                        found =
                            reflect::reflect(std::slice::from_raw_parts(i.p_code, i.code_size / 4))
                                .map(Arc::new);
                    }
                }
                p = (*p).p_next;
            }
            found?
        };
        module.entries.get(&name).cloned()
    }

    /// After `vkCreateComputePipelines` (handles that are null were not created).
    ///
    /// # Safety
    /// `infos` and `out` must hold `count` entries.
    pub unsafe fn on_compute_pipelines(
        &self,
        count: u32,
        infos: *const vk::ComputePipelineCreateInfo<'_>,
        out: *const vk::Pipeline,
    ) {
        if count == 0 || infos.is_null() || out.is_null() {
            return;
        }
        let infos = std::slice::from_raw_parts(infos, count as usize);
        let out = std::slice::from_raw_parts(out, count as usize);
        for (i, p) in infos.iter().zip(out) {
            if *p == vk::Pipeline::null() {
                continue;
            }
            let chain = Chain::of(i.p_next);
            let b = if chain.binaries {
                None // made from pipeline binaries: code echo has not seen
            } else {
                self.stage_bindings(&i.stage).map(Arc::new)
            };
            self.pipelines.insert(raw(*p), b);
        }
    }

    /// After `vkCreateGraphicsPipelines`: the union of the stages' bindings — its own `pStages`
    /// and, for a link (`VkPipelineLibraryCreateInfoKHR`), every library's. A library that holds
    /// no stage (vertex input or fragment output interface) has none; any other pipeline without
    /// a stage, one made from binaries, and one whose library or stage echo did not reflect, is
    /// unknown (issue 53).
    ///
    /// # Safety
    /// `infos` and `out` must hold `count` entries.
    pub unsafe fn on_graphics_pipelines(
        &self,
        count: u32,
        infos: *const vk::GraphicsPipelineCreateInfo<'_>,
        out: *const vk::Pipeline,
    ) {
        if count == 0 || infos.is_null() || out.is_null() {
            return;
        }
        let infos = std::slice::from_raw_parts(infos, count as usize);
        let out = std::slice::from_raw_parts(out, count as usize);
        for (i, p) in infos.iter().zip(out) {
            if *p == vk::Pipeline::null() {
                continue;
            }
            let chain = Chain::of(i.p_next);
            let library = i.flags.contains(vk::PipelineCreateFlags::LIBRARY_KHR)
                || chain.flags2 & LIBRARY_BIT_2 != 0;
            let stages = if i.stage_count == 0 || i.p_stages.is_null() {
                &[][..]
            } else {
                std::slice::from_raw_parts(i.p_stages, i.stage_count as usize)
            };
            let mut all = Some(reflect::Bindings::new());
            if chain.binaries || chain.shader_groups {
                all = None; // code from binaries, or shader groups echo does not read
            } else if stages.is_empty() && chain.libraries.is_empty() && !library {
                all = None; // no stage named: the code is not in the create info
            }
            for s in stages {
                match (self.stage_bindings(s), all.as_mut()) {
                    (Some(b), Some(a)) => reflect::merge_into(a, &b),
                    _ => all = None,
                }
            }
            for l in &chain.libraries {
                let lb = self.pipelines.get(l).and_then(|x| x.clone());
                match (lb, all.as_mut()) {
                    (Some(b), Some(a)) => reflect::merge_into(a, &b),
                    _ => all = None,
                }
            }
            self.pipelines.insert(raw(*p), all.map(Arc::new));
        }
    }

    /// `vkDestroyPipeline`: a recycled handle must not keep its code.
    pub fn on_destroy_pipeline(&self, pipeline: u64) {
        self.pipelines.remove(&pipeline);
    }

    /// After `vkCreateShadersEXT` (`VK_EXT_shader_object`): each shader's entry point reflected
    /// when its code is SPIR-V; a binary is unknown. Handles that are null were not created.
    ///
    /// # Safety
    /// `infos` and `out` must hold `count` entries.
    pub unsafe fn on_create_shaders(
        &self,
        count: u32,
        infos: *const vk::ShaderCreateInfoEXT<'_>,
        out: *const vk::ShaderEXT,
    ) {
        if count == 0 || infos.is_null() || out.is_null() {
            return;
        }
        let infos = std::slice::from_raw_parts(infos, count as usize);
        let out = std::slice::from_raw_parts(out, count as usize);
        for (i, s) in infos.iter().zip(out) {
            if *s == vk::ShaderEXT::null() {
                continue;
            }
            let b = if i.code_type == vk::ShaderCodeTypeEXT::SPIRV
                && !i.p_code.is_null()
                && i.code_size >= 20
            {
                // pCode is `void*`: copied into words whatever its alignment.
                let bytes = std::slice::from_raw_parts(i.p_code as *const u8, i.code_size);
                let words: Vec<u32> = bytes
                    .chunks_exact(4)
                    .map(|c| u32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
                    .collect();
                let name = if i.p_name.is_null() {
                    "main".to_string()
                } else {
                    CStr::from_ptr(i.p_name).to_string_lossy().into_owned()
                };
                reflect::reflect(&words)
                    .and_then(|m| m.entries.get(&name).cloned())
                    .map(Arc::new)
            } else {
                None
            };
            self.shaders.insert(raw(*s), b);
        }
    }

    /// `vkDestroyShaderEXT`.
    pub fn on_destroy_shader(&self, shader: u64) {
        self.shaders.remove(&shader);
    }

    /// `vkCmdBindShadersEXT`: each stage's shader bound, a null one (or a null `pShaders`)
    /// unbinding it.
    pub fn on_bind_shaders(&self, cmd: u64, stages: &[vk::ShaderStageFlags], shaders: &[u64]) {
        let mut c = self.cmds.entry(cmd).or_default();
        for (k, st) in stages.iter().enumerate() {
            let i = if *st == vk::ShaderStageFlags::COMPUTE {
                0
            } else {
                1
            };
            let sh = shaders.get(k).copied().unwrap_or(0);
            if sh == 0 {
                c.points[i].shaders.remove(&st.as_raw());
            } else {
                c.points[i].shaders.insert(st.as_raw(), sh);
            }
        }
    }

    /// The bindings of the code bound at one bind point: the pipeline's and every bound shader
    /// object's together (`None`: nothing bound, or some of it unknown — every bound descriptor
    /// is then read and written).
    fn bound_code(&self, pb: &PointBinds) -> Option<Arc<reflect::Bindings>> {
        let pipe = match pb.pipeline {
            Some(p) => Some(self.pipelines.get(&p)?.clone()?),
            None => None,
        };
        if pb.shaders.is_empty() {
            return pipe; // the common case: a pipeline alone, no copy
        }
        let mut all = pipe.as_deref().cloned().unwrap_or_default();
        for sh in pb.shaders.values() {
            let b = self.shaders.get(sh)?.clone()?;
            reflect::merge_into(&mut all, &b);
        }
        Some(Arc::new(all))
    }

    /// One descriptor written at `(binding, element)`: a buffer (or a texel view's buffer) is
    /// followed, anything else forgets what was there.
    fn put(
        &self,
        into: &mut SetContents,
        binding: u32,
        element: u32,
        ty: vk::DescriptorType,
        w: Written,
    ) {
        use vk::DescriptorType as T;
        let k = (binding, element);
        let d = match (ty, w) {
            (
                T::UNIFORM_BUFFER
                | T::UNIFORM_BUFFER_DYNAMIC
                | T::STORAGE_BUFFER
                | T::STORAGE_BUFFER_DYNAMIC,
                Written::Buffer(bi),
            ) if bi.buffer != vk::Buffer::null() => Some(Desc {
                buffer: raw(bi.buffer),
                offset: bi.offset,
                range: bi.range,
                dynamic: matches!(ty, T::UNIFORM_BUFFER_DYNAMIC | T::STORAGE_BUFFER_DYNAMIC),
                uniform: matches!(ty, T::UNIFORM_BUFFER | T::UNIFORM_BUFFER_DYNAMIC),
            }),
            (T::UNIFORM_TEXEL_BUFFER | T::STORAGE_TEXEL_BUFFER, Written::View(v)) => {
                self.views.get(&raw(v)).map(|r| {
                    let (buffer, offset, range) = *r;
                    Desc {
                        buffer,
                        offset,
                        range,
                        dynamic: false,
                        uniform: ty == T::UNIFORM_TEXEL_BUFFER,
                    }
                })
            }
            _ => None,
        };
        match d {
            Some(d) => {
                into.insert(k, d);
            }
            None => {
                into.remove(&k);
            }
        }
    }

    /// The descriptors of one `VkWriteDescriptorSet` applied onto `into` (set contents).
    unsafe fn apply_writes(&self, into: &mut SetContents, w: &vk::WriteDescriptorSet<'_>) {
        use vk::DescriptorType as T;
        let ty = w.descriptor_type;
        let n = w.descriptor_count as usize;
        for e in 0..w.descriptor_count {
            let i = e as usize;
            let what = match ty {
                T::UNIFORM_BUFFER
                | T::UNIFORM_BUFFER_DYNAMIC
                | T::STORAGE_BUFFER
                | T::STORAGE_BUFFER_DYNAMIC => {
                    if w.p_buffer_info.is_null() {
                        return;
                    }
                    Written::Buffer(std::slice::from_raw_parts(w.p_buffer_info, n)[i])
                }
                T::UNIFORM_TEXEL_BUFFER | T::STORAGE_TEXEL_BUFFER => {
                    if w.p_texel_buffer_view.is_null() {
                        return;
                    }
                    Written::View(std::slice::from_raw_parts(w.p_texel_buffer_view, n)[i])
                }
                _ => Written::Other,
            };
            self.put(into, w.dst_binding, w.dst_array_element + e, ty, what);
        }
    }

    /// `vkCreateBufferView` success: texel descriptors naming `view` use this buffer range.
    pub fn on_buffer_view(&self, view: u64, buffer: u64, offset: u64, range: u64) {
        self.views.insert(view, (buffer, offset, range));
    }

    pub fn on_destroy_view(&self, view: u64) {
        self.views.remove(&view);
    }

    /// `vkUpdateDescriptorSetWithTemplate`: the same per-set records `vkUpdateDescriptorSets`
    /// makes, decoded from `data` by the template's entries.
    ///
    /// # Safety
    /// `data` must be the application's `pData` for `t`.
    pub unsafe fn on_update_with_template(
        &self,
        set: u64,
        t: &UpdateTemplate,
        data: *const c_void,
    ) {
        let written = t.decode(data);
        let mut e = self.sets.entry(set).or_default();
        for (binding, element, ty, w) in written {
            self.put(&mut e, binding, element, ty, w);
        }
    }

    /// `vkUpdateDescriptorSets`.
    ///
    /// # Safety
    /// The arrays must hold their counts of valid entries.
    pub unsafe fn on_update_sets(
        &self,
        write_count: u32,
        writes: *const vk::WriteDescriptorSet<'_>,
        copy_count: u32,
        copies: *const vk::CopyDescriptorSet<'_>,
    ) {
        if write_count > 0 && !writes.is_null() {
            for w in std::slice::from_raw_parts(writes, write_count as usize) {
                let mut e = self.sets.entry(raw(w.dst_set)).or_default();
                self.apply_writes(&mut e, w);
            }
        }
        if copy_count > 0 && !copies.is_null() {
            for c in std::slice::from_raw_parts(copies, copy_count as usize) {
                let src: Vec<(u32, Option<Desc>)> = {
                    let s = self.sets.get(&raw(c.src_set));
                    (0..c.descriptor_count)
                        .map(|i| {
                            let d = s.as_ref().and_then(|s| {
                                s.get(&(c.src_binding, c.src_array_element + i)).copied()
                            });
                            (i, d)
                        })
                        .collect()
                };
                let mut dst = self.sets.entry(raw(c.dst_set)).or_default();
                for (i, d) in src {
                    let k = (c.dst_binding, c.dst_array_element + i);
                    match d {
                        Some(d) => {
                            dst.insert(k, d);
                        }
                        None => {
                            dst.remove(&k);
                        }
                    }
                }
            }
        }
    }

    /// `vkAllocateDescriptorSets` success (a recycled handle starts empty); `layouts[i]` is the
    /// layout of `sets[i]`.
    pub fn on_allocate_sets(&self, sets: &[u64], layouts: &[u64]) {
        for (i, s) in sets.iter().enumerate() {
            self.sets.remove(s);
            match layouts.get(i).and_then(|l| self.late.layouts.get(l)) {
                Some(late) => {
                    self.late.sets.insert(*s, late.clone());
                }
                None => {
                    self.late.sets.remove(s);
                }
            }
        }
    }

    pub fn on_bind_pipeline(&self, cmd: u64, bp: vk::PipelineBindPoint, pipeline: u64) {
        let Some(i) = point_index(bp) else { return };
        self.cmds.entry(cmd).or_default().points[i].pipeline = Some(pipeline);
    }

    /// `vkCmdBindDescriptorSets`: dynamic offsets are dealt to the sets in order, each taking
    /// as many as it has dynamic descriptors written.
    pub fn on_bind_sets(
        &self,
        cmd: u64,
        bp: vk::PipelineBindPoint,
        first: u32,
        sets: &[u64],
        dynamic: &[u32],
    ) {
        let Some(i) = point_index(bp) else { return };
        let mut next_dyn = 0usize;
        let mut c = self.cmds.entry(cmd).or_default();
        for (k, s) in sets.iter().enumerate() {
            let n = self
                .sets
                .get(s)
                .map_or(0, |c| c.values().filter(|d| d.dynamic).count());
            let offs = dynamic
                .get(next_dyn..(next_dyn + n).min(dynamic.len()))
                .unwrap_or(&[])
                .to_vec();
            next_dyn += n;
            let idx = first + k as u32;
            c.points[i].sets.insert(idx, (*s, offs));
            c.points[i].push.remove(&idx);
        }
    }

    /// `vkCmdPushDescriptorSetKHR`.
    ///
    /// # Safety
    /// `writes` must hold `count` valid writes.
    pub unsafe fn on_push_descriptors(
        &self,
        cmd: u64,
        bp: vk::PipelineBindPoint,
        set: u32,
        count: u32,
        writes: *const vk::WriteDescriptorSet<'_>,
    ) {
        let Some(i) = point_index(bp) else { return };
        if count == 0 || writes.is_null() {
            return;
        }
        let mut c = self.cmds.entry(cmd).or_default();
        let contents = c.points[i].push.entry(set).or_default();
        for w in std::slice::from_raw_parts(writes, count as usize) {
            self.apply_writes(contents, w);
        }
        c.points[i].sets.remove(&set);
    }

    /// `vkCmdPushDescriptorSetWithTemplateKHR`: push descriptors decoded from `data` (the bind
    /// point is the template's).
    ///
    /// # Safety
    /// `data` must be the application's `pData` for `t`.
    pub unsafe fn on_push_template(
        &self,
        cmd: u64,
        t: &UpdateTemplate,
        set: u32,
        data: *const c_void,
    ) {
        let Some(i) = point_index(t.bind_point) else {
            return;
        };
        let written = t.decode(data);
        let mut c = self.cmds.entry(cmd).or_default();
        let contents = c.points[i].push.entry(set).or_default();
        for (binding, element, ty, w) in written {
            self.put(contents, binding, element, ty, w);
        }
        c.points[i].sets.remove(&set);
    }

    /// A dispatch or draw: the buffers of the bound descriptors, with the access reflection
    /// found for their binding (unknown pipeline: read-write, uniform buffers: read), then
    /// `extra` (indirect and count buffers). The descriptors of a bound set's late bindings
    /// ([`late_flags`]) are not taken now: the record names a `late` id, resolved at every
    /// submission of the command buffer.
    pub fn on_dispatch_or_draw(
        &self,
        cmd: u64,
        graphics: bool,
        command: &str,
        extra: Vec<BufferUse>,
    ) {
        if !self.on() {
            return;
        }
        let mut uses: Vec<BufferUse> = Vec::new();
        let mut late_uses = Vec::new();
        if let Some(c) = self.cmds.get(&cmd) {
            let pb = &c.points[graphics as usize];
            let refl = self.bound_code(pb);
            for (&set, (handle, offs)) in &pb.sets {
                let late = self.late.sets.get(handle).map(|l| l.clone());
                if let Some(contents) = self.sets.get(handle) {
                    let keep = |b: u32| late.as_ref().is_none_or(|l| !l.contains(&b));
                    set_uses(refl.as_deref(), set, &contents, offs, &keep, &mut uses);
                }
                if let Some(late) = late {
                    late_uses.push(LateUse {
                        id: self.late.next.fetch_add(1, Ordering::Relaxed) + 1,
                        set,
                        handle: *handle,
                        dyn_offs: offs.clone(),
                        refl: refl.clone(),
                        late,
                    });
                }
            }
            for (&set, contents) in &pb.push {
                set_uses(refl.as_deref(), set, contents, &[], &|_| true, &mut uses);
            }
        }
        uses.extend(extra);
        // One id for the command: its late uses are restated together at each submission.
        let late = late_uses.first().map(|u| u.id);
        if let Some(id) = late {
            for u in &mut late_uses {
                u.id = id;
            }
            self.late.uses.entry(cmd).or_default().extend(late_uses);
        }
        if !uses.is_empty() || late.is_some() {
            self.rec(Event::CmdUse {
                cmd,
                command: command.into(),
                uses,
                late,
            });
        }
    }

    /// Before a submission of `cmds` goes down: every late descriptor use they hold (and the
    /// secondaries they execute hold) resolved from the sets as they stand now, one
    /// `cmd_late_use` record per recorded command, ahead of the submission's own record.
    pub fn late_at_submit(&self, cmds: impl Iterator<Item = u64>) {
        if !self.on() || self.late.uses.is_empty() {
            return;
        }
        let mut todo: Vec<(u64, u32)> = cmds.map(|c| (c, 0)).collect();
        let mut seen = std::collections::HashSet::new();
        let mut out: BTreeMap<u64, Vec<BufferUse>> = BTreeMap::new();
        while let Some((cmd, depth)) = todo.pop() {
            if !seen.insert(cmd) {
                continue;
            }
            if let Some(uses) = self.late.uses.get(&cmd) {
                for u in uses.iter() {
                    let v = out.entry(u.id).or_default();
                    if let Some(contents) = self.sets.get(&u.handle) {
                        let keep = |b: u32| u.late.contains(&b);
                        set_uses(u.refl.as_deref(), u.set, &contents, &u.dyn_offs, &keep, v);
                    }
                }
            }
            if depth < 8 {
                if let Some(s) = self.late.executes.get(&cmd) {
                    todo.extend(s.iter().map(|c| (*c, depth + 1)));
                }
            }
        }
        for (late, uses) in out {
            self.rec(Event::CmdLateUse { late, uses });
        }
    }
}

/// `VK_PIPELINE_CREATE_2_LIBRARY_BIT_KHR` (VkPipelineCreateFlags2).
const LIBRARY_BIT_2: u64 = 1 << 11;

/// `VK_STRUCTURE_TYPE_PIPELINE_BINARY_INFO_KHR` (VK_KHR_pipeline_binary; not in ash 0.38).
const PIPELINE_BINARY_INFO_KHR: i32 = 1_000_483_002;

/// What a pipeline create info's `pNext` chain says about where its code comes from.
#[derive(Default)]
struct Chain {
    /// `VkPipelineLibraryCreateInfoKHR`: the libraries linked.
    libraries: Vec<u64>,
    /// `VkPipelineBinaryInfoKHR` with binaries: the code comes from them.
    binaries: bool,
    /// `VkGraphicsPipelineShaderGroupsCreateInfoNV`: more stages, in groups.
    shader_groups: bool,
    /// `VkPipelineCreateFlags2CreateInfoKHR`'s flags.
    flags2: u64,
}

impl Chain {
    /// # Safety
    /// `p` must be a valid `pNext` chain (or null).
    unsafe fn of(p: *const std::ffi::c_void) -> Chain {
        let mut c = Chain::default();
        let mut p = p as *const vk::BaseInStructure<'_>;
        let mut n = 0;
        while !p.is_null() && n < 64 {
            let st = (*p).s_type;
            if st == vk::StructureType::PIPELINE_LIBRARY_CREATE_INFO_KHR {
                let l = &*(p as *const vk::PipelineLibraryCreateInfoKHR<'_>);
                if !l.p_libraries.is_null() {
                    c.libraries.extend(
                        std::slice::from_raw_parts(l.p_libraries, l.library_count as usize)
                            .iter()
                            .map(|x| raw(*x)),
                    );
                }
            } else if st.as_raw() == PIPELINE_BINARY_INFO_KHR {
                // { sType, pNext, binaryCount, pPipelineBinaries }
                #[repr(C)]
                struct BinaryInfo {
                    s_type: vk::StructureType,
                    p_next: *const std::ffi::c_void,
                    binary_count: u32,
                    binaries: *const u64,
                }
                let b = &*(p as *const BinaryInfo);
                c.binaries |= b.binary_count > 0;
            } else if st == vk::StructureType::GRAPHICS_PIPELINE_SHADER_GROUPS_CREATE_INFO_NV {
                c.shader_groups = true;
            } else if st == vk::StructureType::PIPELINE_CREATE_FLAGS_2_CREATE_INFO_KHR {
                let f = &*(p as *const vk::PipelineCreateFlags2CreateInfoKHR<'_>);
                c.flags2 = f.flags.as_raw();
            }
            p = (*p).p_next;
            n += 1;
        }
        c
    }
}
