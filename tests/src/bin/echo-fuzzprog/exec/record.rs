//! Recording: one Vulkan command (or two, for an event barrier) per [`Cmd`] of the program.

use super::*;

impl Exec {
    pub(super) unsafe fn cmd(&mut self, c: vk::CommandBuffer, cmd: &Cmd) -> Res2<()> {
        let dev = self.dev.clone();
        match cmd {
            Cmd::Copy {
                src,
                dst,
                regions,
                v2,
            } => {
                let (s, d) = (self.bufs[src], self.bufs[dst]);
                if *v2 {
                    let r: Vec<vk::BufferCopy2> = regions
                        .iter()
                        .map(|&[a, b, n]| {
                            vk::BufferCopy2::default()
                                .src_offset(a)
                                .dst_offset(b)
                                .size(n)
                        })
                        .collect();
                    self.c("vkCmdCopyBuffer2");
                    dev.cmd_copy_buffer2(
                        c,
                        &vk::CopyBufferInfo2::default()
                            .src_buffer(s)
                            .dst_buffer(d)
                            .regions(&r),
                    );
                } else {
                    let r: Vec<vk::BufferCopy> = regions
                        .iter()
                        .map(|&[a, b, n]| vk::BufferCopy {
                            src_offset: a,
                            dst_offset: b,
                            size: n,
                        })
                        .collect();
                    self.c("vkCmdCopyBuffer");
                    dev.cmd_copy_buffer(c, s, d, &r);
                }
            }
            Cmd::Fill {
                buf,
                offset,
                size,
                val,
            } => {
                self.c("vkCmdFillBuffer");
                dev.cmd_fill_buffer(c, self.bufs[buf], *offset, *size, *val);
            }
            Cmd::Update {
                buf,
                offset,
                size,
                val,
            } => {
                let data: Vec<u8> = (0..*size / 4)
                    .flat_map(|w| pattern(*val, offset + w * 4).to_le_bytes())
                    .collect();
                self.c("vkCmdUpdateBuffer");
                dev.cmd_update_buffer(c, self.bufs[buf], *offset, &data);
            }
            Cmd::ImageInit { img } => {
                let b = vk::ImageMemoryBarrier::default()
                    .src_access_mask(vk::AccessFlags::MEMORY_WRITE)
                    .dst_access_mask(
                        vk::AccessFlags::TRANSFER_READ | vk::AccessFlags::TRANSFER_WRITE,
                    )
                    .old_layout(vk::ImageLayout::UNDEFINED)
                    .new_layout(vk::ImageLayout::GENERAL)
                    .src_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
                    .dst_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
                    .image(self.imgs[img])
                    .subresource_range(color_range());
                self.c("vkCmdPipelineBarrier");
                dev.cmd_pipeline_barrier(
                    c,
                    vk::PipelineStageFlags::ALL_COMMANDS,
                    vk::PipelineStageFlags::TRANSFER,
                    vk::DependencyFlags::empty(),
                    &[],
                    &[],
                    &[b],
                );
            }
            Cmd::ClearImage { img, val } => {
                let color = vk::ClearColorValue {
                    uint32: [*val, val ^ 1, val ^ 2, val ^ 3],
                };
                self.c("vkCmdClearColorImage");
                dev.cmd_clear_color_image(
                    c,
                    self.imgs[img],
                    vk::ImageLayout::GENERAL,
                    &color,
                    &[color_range()],
                );
            }
            Cmd::QueryCopy { buf, offset, v2 } => {
                let (pool, q) = self.query_for(c)?;
                self.c("vkCmdResetQueryPool");
                dev.cmd_reset_query_pool(c, pool, q, 1);
                if *v2 {
                    self.c("vkCmdWriteTimestamp2");
                    dev.cmd_write_timestamp2(c, vk::PipelineStageFlags2::ALL_COMMANDS, pool, q);
                } else {
                    self.c("vkCmdWriteTimestamp");
                    dev.cmd_write_timestamp(c, vk::PipelineStageFlags::BOTTOM_OF_PIPE, pool, q);
                }
                self.c("vkCmdCopyQueryPoolResults");
                dev.cmd_copy_query_pool_results(
                    c,
                    pool,
                    q,
                    1,
                    self.bufs[buf],
                    *offset,
                    8,
                    vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WAIT,
                );
            }
            Cmd::PushConstants { val } => {
                let layout = self.pipe(Kernel::Inplace, Kind::Plain, false)?.layout;
                let pc = [*val, val.rotate_left(7)];
                let bytes: Vec<u8> = pc.iter().flat_map(|w| w.to_le_bytes()).collect();
                self.c("vkCmdPushConstants");
                dev.cmd_push_constants(c, layout, vk::ShaderStageFlags::COMPUTE, 0, &bytes);
            }
            Cmd::ToImage {
                buf,
                offset,
                img,
                v2,
            }
            | Cmd::FromImage {
                img,
                buf,
                offset,
                v2,
            } => {
                let to = matches!(cmd, Cmd::ToImage { .. });
                let (b, i) = (self.bufs[buf], self.imgs[img]);
                let ext = vk::Extent3D {
                    width: IMAGE_W,
                    height: IMAGE_H,
                    depth: 1,
                };
                let layers = vk::ImageSubresourceLayers {
                    aspect_mask: vk::ImageAspectFlags::COLOR,
                    mip_level: 0,
                    base_array_layer: 0,
                    layer_count: 1,
                };
                if *v2 {
                    let r = [vk::BufferImageCopy2::default()
                        .buffer_offset(*offset)
                        .image_subresource(layers)
                        .image_extent(ext)];
                    if to {
                        self.c("vkCmdCopyBufferToImage2");
                        dev.cmd_copy_buffer_to_image2(
                            c,
                            &vk::CopyBufferToImageInfo2::default()
                                .src_buffer(b)
                                .dst_image(i)
                                .dst_image_layout(vk::ImageLayout::GENERAL)
                                .regions(&r),
                        );
                    } else {
                        self.c("vkCmdCopyImageToBuffer2");
                        dev.cmd_copy_image_to_buffer2(
                            c,
                            &vk::CopyImageToBufferInfo2::default()
                                .src_image(i)
                                .src_image_layout(vk::ImageLayout::GENERAL)
                                .dst_buffer(b)
                                .regions(&r),
                        );
                    }
                } else {
                    let r = [vk::BufferImageCopy {
                        buffer_offset: *offset,
                        buffer_row_length: 0,
                        buffer_image_height: 0,
                        image_subresource: layers,
                        image_offset: vk::Offset3D::default(),
                        image_extent: ext,
                    }];
                    if to {
                        self.c("vkCmdCopyBufferToImage");
                        dev.cmd_copy_buffer_to_image(c, b, i, vk::ImageLayout::GENERAL, &r);
                    } else {
                        self.c("vkCmdCopyImageToBuffer");
                        dev.cmd_copy_image_to_buffer(c, i, vk::ImageLayout::GENERAL, b, &r);
                    }
                }
            }
            Cmd::Barrier {
                v2,
                event,
                buf,
                src_stage,
                src_access,
                dst_stage,
                dst_access,
            } => {
                let ev = if *event {
                    Some(self.event_for(c)?)
                } else {
                    None
                };
                if *v2 {
                    let mb = [vk::MemoryBarrier2::default()
                        .src_stage_mask(vk::PipelineStageFlags2::from_raw(*src_stage))
                        .src_access_mask(vk::AccessFlags2::from_raw(*src_access))
                        .dst_stage_mask(vk::PipelineStageFlags2::from_raw(*dst_stage))
                        .dst_access_mask(vk::AccessFlags2::from_raw(*dst_access))];
                    let bb: Vec<vk::BufferMemoryBarrier2> = buf
                        .iter()
                        .map(|b| {
                            vk::BufferMemoryBarrier2::default()
                                .src_stage_mask(vk::PipelineStageFlags2::from_raw(*src_stage))
                                .src_access_mask(vk::AccessFlags2::from_raw(*src_access))
                                .dst_stage_mask(vk::PipelineStageFlags2::from_raw(*dst_stage))
                                .dst_access_mask(vk::AccessFlags2::from_raw(*dst_access))
                                .src_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
                                .dst_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
                                .buffer(self.bufs[b])
                                .size(vk::WHOLE_SIZE)
                        })
                        .collect();
                    let mut info = vk::DependencyInfo::default().buffer_memory_barriers(&bb);
                    if buf.is_none() {
                        info = info.memory_barriers(&mb);
                    }
                    if let Some(e) = ev {
                        // The same dependency info in both, as vkCmdWaitEvents2 requires.
                        self.c("vkCmdSetEvent2");
                        dev.cmd_set_event2(c, e, &info);
                        self.c("vkCmdWaitEvents2");
                        dev.cmd_wait_events2(c, &[e], std::slice::from_ref(&info));
                        // Unsignalled for the next submission, after what waited on it (all
                        // commands: synchronization validation wants the reset ordered after the
                        // wait and before the next set).
                        self.c("vkCmdResetEvent2");
                        dev.cmd_reset_event2(c, e, vk::PipelineStageFlags2::ALL_COMMANDS);
                    } else {
                        self.c("vkCmdPipelineBarrier2");
                        dev.cmd_pipeline_barrier2(c, &info);
                    }
                } else {
                    let ss = vk::PipelineStageFlags::from_raw(*src_stage as u32);
                    let ds = vk::PipelineStageFlags::from_raw(*dst_stage as u32);
                    let (sa, da) = (
                        vk::AccessFlags::from_raw(*src_access as u32),
                        vk::AccessFlags::from_raw(*dst_access as u32),
                    );
                    let m = [vk::MemoryBarrier::default()
                        .src_access_mask(sa)
                        .dst_access_mask(da)];
                    let bb: Vec<vk::BufferMemoryBarrier> = buf
                        .iter()
                        .map(|b| {
                            vk::BufferMemoryBarrier::default()
                                .src_access_mask(sa)
                                .dst_access_mask(da)
                                .src_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
                                .dst_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
                                .buffer(self.bufs[b])
                                .size(vk::WHOLE_SIZE)
                        })
                        .collect();
                    let mb: &[vk::MemoryBarrier] = if buf.is_none() { &m } else { &[] };
                    if let Some(e) = ev {
                        self.c("vkCmdSetEvent");
                        dev.cmd_set_event(c, e, ss);
                        self.c("vkCmdWaitEvents");
                        dev.cmd_wait_events(c, &[e], ss, ds, mb, &bb, &[]);
                        self.c("vkCmdResetEvent");
                        dev.cmd_reset_event(c, e, vk::PipelineStageFlags::ALL_COMMANDS);
                    } else {
                        self.c("vkCmdPipelineBarrier");
                        dev.cmd_pipeline_barrier(
                            c,
                            ss,
                            ds,
                            vk::DependencyFlags::empty(),
                            mb,
                            &bb,
                            &[],
                        );
                    }
                }
            }
            Cmd::Dispatch {
                kernel,
                desc,
                groups,
                base,
                indirect,
                n,
                k,
                bind2,
                code,
                draw,
            } => {
                let m6 = match (bind2, &self.maint6) {
                    (false, _) => None,
                    (true, Some(m6)) => Some(m6.clone()),
                    (true, None) => return Err((3, "no VK_KHR_maintenance6".into())),
                };
                let kind = match desc {
                    Desc::Set { set } => self.sets[set].2,
                    Desc::Push { .. } => Kind::Push,
                    Desc::Addr { .. } => Kind::Plain,
                };
                let gfx = !draw.is_none();
                let (bp, stage) = if gfx {
                    (
                        vk::PipelineBindPoint::GRAPHICS,
                        vk::ShaderStageFlags::VERTEX,
                    )
                } else {
                    (
                        vk::PipelineBindPoint::COMPUTE,
                        vk::ShaderStageFlags::COMPUTE,
                    )
                };
                let (pipeline, layout) = if gfx {
                    self.draw_pipeline(*kernel, kind, *draw == Draw::Library)?
                } else {
                    let p = self.pipe(*kernel, kind, false)?;
                    (p.pipeline, p.layout)
                };
                if gfx {
                    // A rendering without attachments over a 4×4 area: the points' fragment
                    // shader writes nothing.
                    let ri = vk::RenderingInfo::default()
                        .render_area(vk::Rect2D {
                            offset: vk::Offset2D { x: 0, y: 0 },
                            extent: vk::Extent2D {
                                width: 4,
                                height: 4,
                            },
                        })
                        .layer_count(1);
                    self.c("vkCmdBeginRendering");
                    dev.cmd_begin_rendering(c, &ri);
                }
                // The code: a pipeline, a shader object, or one bound over the other's.
                let other = if *kernel == Kernel::Inplace {
                    Kernel::Xform
                } else {
                    Kernel::Inplace
                };
                match code {
                    Code::Pipeline if gfx => {
                        self.c("vkCmdBindPipeline");
                        dev.cmd_bind_pipeline(c, bp, pipeline);
                    }
                    Code::Pipeline => self.bind_pipeline(c, pipeline),
                    Code::Object | Code::ObjectUnbind => {
                        let s = self.shader(*kernel, kind)?;
                        self.bind_shader(c, s)?;
                    }
                    Code::PipelineThenObject => {
                        let p = self.pipe(other, Kind::Plain, false)?.pipeline;
                        self.bind_pipeline(c, p);
                        let s = self.shader(*kernel, kind)?;
                        self.bind_shader(c, s)?;
                    }
                    Code::ObjectThenPipeline => {
                        let s = self.shader(other, Kind::Plain)?;
                        self.bind_shader(c, s)?;
                        self.bind_pipeline(c, pipeline);
                    }
                }
                let mut pc: Vec<u8> = vec![];
                match desc {
                    Desc::Set { set } => {
                        let sets = [self.sets[set].0];
                        if let Some(m6) = &m6 {
                            self.c("vkCmdBindDescriptorSets2");
                            let info = vk::BindDescriptorSetsInfoKHR::default()
                                .stage_flags(stage)
                                .layout(layout)
                                .descriptor_sets(&sets);
                            (m6.fp().cmd_bind_descriptor_sets2_khr)(c, &info);
                        } else {
                            self.c("vkCmdBindDescriptorSets");
                            dev.cmd_bind_descriptor_sets(c, bp, layout, 0, &sets, &[]);
                        }
                    }
                    Desc::Push { res, template } => {
                        let (bi, vi) = self.descriptors(res);
                        let push = self
                            .push
                            .clone()
                            .ok_or((3, "no push descriptors".to_string()))?;
                        if *template {
                            let t = self.template(*kernel, Kind::Push, gfx)?;
                            let data: *const std::ffi::c_void = if *kernel == Kernel::Texel {
                                vi.as_ptr().cast()
                            } else {
                                bi.as_ptr().cast()
                            };
                            if let Some(m6) = &m6 {
                                self.c("vkCmdPushDescriptorSetWithTemplate2");
                                let info = vk::PushDescriptorSetWithTemplateInfoKHR::default()
                                    .descriptor_update_template(t)
                                    .layout(layout)
                                    .data(data);
                                (m6.fp().cmd_push_descriptor_set_with_template2_khr)(c, &info);
                            } else {
                                self.c("vkCmdPushDescriptorSetWithTemplate");
                                (push.fp().cmd_push_descriptor_set_with_template_khr)(
                                    c, t, layout, 0, data,
                                );
                            }
                        } else {
                            let w = self.writes(*kernel, vk::DescriptorSet::null(), &bi, &vi);
                            if let Some(m6) = &m6 {
                                self.c("vkCmdPushDescriptorSet2");
                                let info = vk::PushDescriptorSetInfoKHR::default()
                                    .stage_flags(stage)
                                    .layout(layout)
                                    .descriptor_writes(&w);
                                (m6.fp().cmd_push_descriptor_set2_khr)(c, &info);
                            } else {
                                self.c("vkCmdPushDescriptorSet");
                                push.cmd_push_descriptor_set(c, bp, layout, 0, &w);
                            }
                        }
                    }
                    Desc::Addr { src, dst } => {
                        for b in [src, dst] {
                            self.c("vkGetBufferDeviceAddress");
                            let a = dev.get_buffer_device_address(
                                &vk::BufferDeviceAddressInfo::default().buffer(self.bufs[b]),
                            );
                            pc.extend_from_slice(&a.to_le_bytes());
                        }
                    }
                }
                pc.extend_from_slice(&n.to_le_bytes());
                pc.extend_from_slice(&k.to_le_bytes());
                if let Some(m6) = &m6 {
                    self.c("vkCmdPushConstants2");
                    let info = vk::PushConstantsInfoKHR::default()
                        .layout(layout)
                        .stage_flags(stage)
                        .values(&pc);
                    (m6.fp().cmd_push_constants2_khr)(c, &info);
                } else {
                    self.c("vkCmdPushConstants");
                    dev.cmd_push_constants(c, layout, stage, 0, &pc);
                }
                if gfx {
                    // A point per vertex, from vertex `base` (gl_VertexIndex counts from it).
                    self.c("vkCmdDraw");
                    dev.cmd_draw(c, *groups, 1, *base, 0);
                    self.c("vkCmdEndRendering");
                    dev.cmd_end_rendering(c);
                } else if let Some((b, off)) = indirect {
                    self.c("vkCmdDispatchIndirect");
                    dev.cmd_dispatch_indirect(c, self.bufs[b], *off);
                } else if *base > 0 {
                    self.c("vkCmdDispatchBase");
                    dev.cmd_dispatch_base(c, *base, 0, 0, *groups, 1, 1);
                } else {
                    self.c("vkCmdDispatch");
                    dev.cmd_dispatch(c, *groups, 1, 1);
                }
                if *code == Code::ObjectUnbind {
                    self.bind_shader(c, vk::ShaderEXT::null())?;
                }
                let _ = LOCAL;
            }
        }
        Ok(())
    }

    unsafe fn bind_pipeline(&mut self, c: vk::CommandBuffer, p: vk::Pipeline) {
        self.c("vkCmdBindPipeline");
        self.dev
            .cmd_bind_pipeline(c, vk::PipelineBindPoint::COMPUTE, p);
    }

    /// vkCmdBindShadersEXT of `s` (null: unbinds) to the compute stage.
    unsafe fn bind_shader(&mut self, c: vk::CommandBuffer, s: vk::ShaderEXT) -> Res2<()> {
        let so = self
            .shader_object
            .clone()
            .ok_or((3, "no VK_EXT_shader_object".to_string()))?;
        self.c("vkCmdBindShadersEXT");
        so.cmd_bind_shaders(c, &[vk::ShaderStageFlags::COMPUTE], &[s]);
        Ok(())
    }

    /// The next timestamp query of command buffer `c` being recorded (from one pool made at
    /// the first use).
    unsafe fn query_for(&mut self, c: vk::CommandBuffer) -> Res2<(vk::QueryPool, u32)> {
        const QUERIES: u32 = 1024;
        if self.queries.is_none() {
            self.c("vkCreateQueryPool");
            let p = self
                .dev
                .create_query_pool(
                    &vk::QueryPoolCreateInfo::default()
                        .query_type(vk::QueryType::TIMESTAMP)
                        .query_count(QUERIES),
                    None,
                )
                .map_err(vkerr("vkCreateQueryPool"))?;
            self.queries = Some((p, 0));
        }
        let (pool, used) = self.queries.unwrap();
        let i = self.recording_query;
        self.recording_query += 1;
        let have = self.cb_queries.entry(c).or_default();
        if let Some(q) = have.get(i) {
            return Ok((pool, *q));
        }
        if used >= QUERIES {
            return Err((2, "more than 1024 timestamp queries".into()));
        }
        have.push(used);
        self.queries = Some((pool, used + 1));
        Ok((pool, used))
    }

    /// The next event of command buffer `c` being recorded (made at its first use).
    unsafe fn event_for(&mut self, c: vk::CommandBuffer) -> Res2<vk::Event> {
        let i = self.recording;
        self.recording += 1;
        let have = self.cb_events.entry(c).or_default();
        if let Some(e) = have.get(i) {
            return Ok(*e);
        }
        let e = self
            .dev
            .create_event(&vk::EventCreateInfo::default(), None)
            .map_err(vkerr("vkCreateEvent"))?;
        self.cb_events.get_mut(&c).unwrap().push(e);
        Ok(e)
    }
}
