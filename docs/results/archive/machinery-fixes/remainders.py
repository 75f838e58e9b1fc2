"""Partly filled batches in one pass of the stream over Multi30K: each chunk's remainder as a batch of its
own (before) or carried into the next chunk (after); uniform keep 0.7, 2,048 and 4,096 tokens, a chunk
every 50 and every 5 batches.

    python docs/results/archive/machinery-fixes/remainders.py data-bin/multi30k.de-en
"""
import sys

import numpy as np, fairseq
from fairseq.data import Dictionary, data_utils, LanguagePairDataset
from fairseq_autoassist.data import ShrinkingBatchStream
from fairseq_autoassist.data.iterator import token_budget_batcher, pairs_per_chunk
from fairseq_autoassist.selection import draw_keep_mask
D=sys.argv[1] if len(sys.argv) > 1 else 'data-bin/multi30k.de-en'
d=Dictionary.load(D+'/dict.de.txt')
src=data_utils.load_indexed_dataset(D+'/train.de-en.de', d); tgt=data_utils.load_indexed_dataset(D+'/train.de-en.en', d)
ds=LanguagePairDataset(src, src.sizes, d, tgt, tgt.sizes, d)
order=np.asarray(ds.ordered_indices(), dtype=np.int64)
for max_tokens in (2048, 4096):
    mk=token_budget_batcher(ds, max_tokens, None, 1, order)
    full=mk(order)
    for refresh in (50, 5):
        chunk=pairs_per_chunk(refresh, len(order), len(full))
        def select(indices, epoch, p, c):
            m=draw_keep_mask(np.full(len(indices),0.7),1,p,c); return indices[m], np.full(m.sum(),0.7,np.float32)
        for carry in (False, True):
            st=ShrinkingBatchStream(order, np.asarray(ds.tgt_sizes), chunk, 1, mk, select)
            batches=[]; c0=st.carry
            for ch in range(st.chunks_per_pass):
                _,_,out,nxt=st.generate_chunk(2,2,ch, c0 if carry else st.carry.__class__((np.zeros(0,np.int64),np.zeros(0,np.float32))))
                if carry: c0=nxt
                else:
                    out += [(nxt[0], nxt[1])] if len(nxt[0]) else []
                batches += [b for b,_ in out]
            padded=np.array([max(ds.src_sizes[b].max(), ds.tgt_sizes[b].max())*len(b) for b in batches])
            print(f"max_tokens {max_tokens} refresh {refresh}: {'carried' if carry else 'own batch'}: {len(batches)} batches, "
                  f"{(padded < max_tokens/2).sum()} below half full, {(padded < 0.2*max_tokens).sum()} below 20%; baseline pass of kept-all: {len(full)}")
