-- Headless Neovim 0.11, as a user would: open model.py, start `tensorviz lsp` with
-- followCursor on (its settings answer workspace/configuration), trust the workspace, Open
-- as Graph with the lens's command, then on the captured line `return jax.nn.relu(...)`:
--   1. list the code actions (`vim.lsp.buf.code_action()`) and apply "Show in Graph": with
--      no page open, the server opens the URL (vim.ui.open, replaced here to record it);
--   2. wait for the test to open the page's event channel, apply it again: no new URL
--      (the test reads the `show` event);
--   3. move the cursor with the documented CursorMoved autocmd (document_highlight): the
--      test reads the `cursor` event.
-- Protocol with the test: $TV_OUT.step1 (the URL) → $TV_OUT.page (test subscribed) →
-- $TV_OUT.step2 → $TV_OUT.moved ... → $TV_OUT (result) → $TV_OUT.done.
local out_path = assert(os.getenv("TV_OUT"))
local ws = assert(os.getenv("TV_WS"))
local cmd = vim.json.decode(assert(os.getenv("TV_CMD")))
local result = { messages = {}, opened = {} }

local function write(path, data)
  local fh = assert(io.open(path .. ".tmp", "w"))
  fh:write(vim.json.encode(data))
  fh:close()
  os.rename(path .. ".tmp", path)
end

local function exists(path) return vim.uv.fs_stat(path) ~= nil end

local function finish(err)
  result.error = err
  write(out_path, result)
  vim.wait(60000, function() return exists(out_path .. ".done") end, 100)
  for _, c in ipairs(vim.lsp.get_clients()) do c:stop() end
  vim.wait(5000, function() return #vim.lsp.get_clients() == 0 end, 50)
  vim.cmd("qall!")
end

local ok, err = pcall(function()
  vim.ui.open = function(url)
    table.insert(result.opened, url)
    return { wait = function() return { code = 0 } end }, nil
  end
  local show_message = vim.lsp.handlers["window/showMessage"]
  vim.lsp.handlers["window/showMessage"] = function(e, params, ctx)
    table.insert(result.messages, params.message)
    return show_message(e, params, ctx)
  end

  vim.cmd.edit(ws .. "/model.py")
  local bufnr = vim.api.nvim_get_current_buf()
  local id = assert(vim.lsp.start({
    name = "tensorviz", cmd = cmd, root_dir = ws,
    settings = { tensorviz = { followCursor = true } },
  }))
  local client = assert(vim.lsp.get_client_by_id(id))
  assert(vim.wait(60000, function() return client.initialized end, 50), "server did not initialize")
  -- The documented follow-cursor setup (docs/editors.md).
  vim.api.nvim_create_autocmd({ "CursorMoved", "CursorHold" }, {
    buffer = bufnr, callback = function() vim.lsp.buf.document_highlight() end,
  })

  local done = false
  client:exec_cmd({ title = "Trust", command = "tensorviz.trustWorkspace", arguments = {} }, { bufnr = bufnr },
    function(e) done = (e == nil) end)
  assert(vim.wait(30000, function() return done end, 50), "trust command failed")
  done = false
  client:exec_cmd({ title = "Open as Graph", command = "tensorviz.openGraph",
    arguments = { { uri = vim.uri_from_bufnr(bufnr), symbol = "net" } } }, { bufnr = bufnr },
    function(e) done = (e == nil) end)
  assert(vim.wait(100000, function() return done and #result.opened == 1 end, 100), "Open as Graph opened nothing")

  -- The captured line: `return jax.nn.relu(x @ jnp.ones((3, 4)))`.
  local line = nil
  for i, l in ipairs(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)) do
    if l:match("return jax%.nn%.relu") then line = i end
  end
  assert(line, "no relu line")
  vim.api.nvim_win_set_cursor(0, { line, 8 })
  local params = vim.lsp.util.make_range_params(0, client.offset_encoding)
  params.context = { diagnostics = {} }
  local answers = vim.lsp.buf_request_sync(bufnr, "textDocument/codeAction", params, 30000)
  result.actions = {}
  for _, a in ipairs((answers[id] or {}).result or {}) do table.insert(result.actions, a.title) end
  -- the def line has no Show in Graph
  vim.api.nvim_win_set_cursor(0, { line - 1, 4 })
  params = vim.lsp.util.make_range_params(0, client.offset_encoding)
  params.context = { diagnostics = {} }
  answers = vim.lsp.buf_request_sync(bufnr, "textDocument/codeAction", params, 30000)
  result.def_actions = {}
  for _, a in ipairs((answers[id] or {}).result or {}) do table.insert(result.def_actions, a.title) end

  local function show_in_graph()
    vim.api.nvim_win_set_cursor(0, { line, 8 })
    vim.lsp.buf.code_action({
      apply = true,
      filter = function(a) return a.title:match("^Show in Graph") ~= nil end,
    })
  end
  show_in_graph()
  assert(vim.wait(30000, function() return #result.opened == 2 end, 50), "Show in Graph opened no URL")
  write(out_path .. ".step1", { url = result.opened[2] })

  -- The test opened a page on that capture: Show in Graph now focuses it.
  assert(vim.wait(30000, function() return exists(out_path .. ".page") end, 50), "the test never opened a page")
  vim.wait(400)  -- the cursor pushes of the moves above settle first
  show_in_graph()
  vim.wait(1500)
  write(out_path .. ".step2", { opened = #result.opened })

  -- Follow the cursor: onto the def line (nothing), then back onto the relu line.
  assert(vim.wait(30000, function() return exists(out_path .. ".moved") end, 50), "the test never read step 2")
  vim.api.nvim_win_set_cursor(0, { line - 1, 4 })
  vim.api.nvim_exec_autocmds("CursorMoved", { buffer = bufnr })
  vim.api.nvim_win_set_cursor(0, { line, 8 })
  vim.api.nvim_exec_autocmds("CursorMoved", { buffer = bufnr })
  vim.wait(1500)
end)
finish(not ok and tostring(err) or nil)
