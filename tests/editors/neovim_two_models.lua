-- Headless Neovim with two models in one workspace, driven step by step with the test
-- (tests/editors/test_neovim.py), which has the viewer pages open in Chromium meanwhile:
--   1. capture the spec's `net` (profile jax_example) and run the lens of tiny.py's Flax
--      `Tiny` (no profile yet: the viewer's setup form opens); both URLs are recorded;
--   2. edit and save model.py (net's graph goes stale);
--   3. edit and save model.py again;
--   4. recapture jax_example from Neovim (`tensorviz.captureProfile`).
-- After step N the results go to $TV_DIR/stepN.json, and the script waits for the test's
-- $TV_DIR/goN before the next step. Every work-done progress that begins (title and
-- message) and every URL Neovim is asked to open (vim.ui.open, replaced) is recorded.
-- A failure goes to $TV_DIR/error.json.
local dir = assert(os.getenv("TV_DIR"))
local ws = assert(os.getenv("TV_WS"))
local cmd = vim.json.decode(assert(os.getenv("TV_CMD")))
local result = { opened = {}, progress = {}, messages = {} }

local function write_json(name, data)
  local tmp = dir .. "/" .. name .. ".tmp"
  local fh = assert(io.open(tmp, "w"))
  fh:write(vim.json.encode(data))
  fh:close()
  os.rename(tmp, dir .. "/" .. name)
end

-- Publish what is known after step n, then wait (serving the LSP meanwhile) for the
-- test's go-ahead.
local function step(n)
  write_json("step" .. n .. ".json", result)
  assert(vim.wait(240000, function() return vim.uv.fs_stat(dir .. "/go" .. n) ~= nil end, 100),
    "the test never said go" .. n)
end

local function finish(err)
  if err then write_json("error.json", { error = err, result = result }) end
  for _, c in ipairs(vim.lsp.get_clients()) do c:stop() end
  vim.wait(5000, function() return #vim.lsp.get_clients() == 0 end, 50)
  vim.cmd("qall!")
end

local ok, err = pcall(function()
  vim.ui.open = function(url)
    table.insert(result.opened, url)
    return { wait = function() return { code = 0 } end }, nil
  end
  local progress = vim.lsp.handlers["$/progress"]
  vim.lsp.handlers["$/progress"] = function(e, params, ctx)
    local v = params.value or {}
    if v.kind == "begin" then table.insert(result.progress, { title = v.title, message = v.message }) end
    return progress(e, params, ctx)
  end
  local show_message = vim.lsp.handlers["window/showMessage"]
  vim.lsp.handlers["window/showMessage"] = function(e, params, ctx)
    table.insert(result.messages, params.message)
    return show_message(e, params, ctx)
  end

  vim.cmd.edit(ws .. "/model.py")
  local model = vim.api.nvim_get_current_buf()
  local id = assert(vim.lsp.start({ name = "tensorviz", cmd = cmd, root_dir = ws }))
  local client = assert(vim.lsp.get_client_by_id(id))
  assert(vim.wait(60000, function() return client.initialized end, 50), "server did not initialize")

  local function run(command, args, bufnr, timeout)
    local answered, answer, failure = false, nil, nil
    client:exec_cmd({ title = command, command = command, arguments = args }, { bufnr = bufnr },
      function(e, res) answered, answer, failure = true, res, e end)
    assert(vim.wait(timeout or 150000, function() return answered end, 100), command .. " never answered")
    assert(failure == nil, command .. " failed: " .. vim.inspect(failure))
    return answer
  end

  run("tensorviz.trustWorkspace", {}, model, 30000)

  -- 1. net captured; Tiny's lens opens its setup form (no profile yet).
  result.net = run("tensorviz.captureProfile", { "jax_example" }, model)
  vim.cmd.edit(ws .. "/tiny.py")
  local tiny = vim.api.nvim_get_current_buf()
  vim.lsp.buf_attach_client(tiny, id)
  local lenses = {}
  assert(vim.wait(60000, function()
    vim.lsp.codelens.refresh({ bufnr = tiny })
    vim.wait(300)
    lenses = vim.lsp.codelens.get(tiny)
    return #lenses > 0 and lenses[1].command ~= nil
  end, 100), "no code lens on tiny.py")
  result.tiny_lens = lenses[1].command.title
  result.tiny = run(lenses[1].command.command, lenses[1].command.arguments, tiny)
  step(1)

  -- 2. and 3. net's file edited and saved (what the graph shows changes each time).
  -- The buffer is switched to, not `:edit`ed: `:edit` of the buffer already current (step 3)
  -- reads the file again, which detaches it from the client (didClose; vim.lsp.start does
  -- not attach it again), so the edit and the save that follow never reach the server, and
  -- whether the graph goes stale hangs on the server reading the disk after the write.
  local function edit_net(body)
    vim.api.nvim_set_current_buf(model)
    assert(vim.lsp.buf_is_attached(model, id), "model.py is no longer attached to the server")
    local lines = vim.api.nvim_buf_get_lines(model, 0, -1, false)
    for i, l in ipairs(lines) do
      if l:find("^    return ") then lines[i] = "    return " .. body end
    end
    vim.api.nvim_buf_set_lines(model, 0, -1, false, lines)
    vim.cmd("write")
  end
  edit_net("jnp.tanh(jax.nn.relu(x @ jnp.ones((3, 4))))")
  step(2)
  edit_net("jnp.exp(jnp.tanh(jax.nn.relu(x @ jnp.ones((3, 4)))))")
  step(3)

  -- 4. A recapture from Neovim, as after any edit.
  result.recapture = run("tensorviz.captureProfile", { "jax_example" }, model)
  step(4)
end)
finish(not ok and tostring(err) or nil)
